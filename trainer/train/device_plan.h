// device_plan.h — where gpt2-train computes and how its ranks talk: the --device / --comm /
// --precision / --attention decision, made once per rank from the flags, the device probe and the placement of
// ranks on hosts.
//
// Is: a pure function (no CUDA, no MPI call), so every branch is tested on machines without a GPU
// by handing it a DeviceProbe: cuda when asked for (or, with auto, when the build has CUDA and a
// device answers); device LOCAL_RANK % device_count; NCCL only when every rank on this host has a
// GPU of its own (NCCL refuses two ranks of one communicator on one device), else MPI with host
// staging (comm/host_staging_communicator.h) so that TP2xDP2 runs on a single-GPU machine. Each
// decision comes with the one line the trainer prints.
// Is not: the probing itself (ops/cuda/cuda_backend.h) nor the construction of ops and
// communicators (trainer.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ops/cuda/cuda_backend.h"
#include "rankscope/format/status.h"

namespace gpt2 {

enum class CommBackend { kMpi, kNccl };
std::string_view comm_backend_name(CommBackend c);  // "mpi" | "nccl"

struct DeviceRequest {
  std::string device = "auto";     // auto | cpu | cuda
  std::string comm = "auto";       // auto | mpi | nccl
  std::string precision = "auto";  // auto (cuda: bf16, cpu: fp32) | fp32 | bf16
  std::string attention = "auto";  // auto (cuda: flash, cpu: kCpuDefaultAttention) | naive | flash
};

// The CPU's --attention auto. See kCpuDefaultAttention in device_plan.cpp for the measurement.
extern const AttentionKind kCpuDefaultAttention;

// Where this rank sits: its index among the ranks of its host, and how many ranks that host runs.
struct HostPlacement {
  int local_rank = 0;
  int local_size = 1;
  int world_size = 1;
  bool has_mpi = false;  // a launcher started us: MPI is there for host collectives
};

// Ranks on the same host as `rank`, from every rank's host name (Bootstrap::gather_hosts).
HostPlacement placement_from_hosts(const std::vector<std::string>& hosts, int rank, bool has_mpi);

struct DevicePlan {
  bool cuda = false;
  int device_index = -1;        // cuda only
  CudaPrecision precision = CudaPrecision::kFp32;
  AttentionKind attention = AttentionKind::kNaive;
  CommBackend comm = CommBackend::kMpi;
  bool host_staging = false;    // cuda + MPI: buffers go through host memory
  std::string device_line;      // "device: cuda 0 (NVIDIA H100 ...), bf16" or "device: cpu (no CUDA device ...)"
  std::string comm_line;        // "comm: nccl (each of 2 ranks on this host has its own GPU)"
};

// Errors (kInvalidArgument, with a hint) for combinations that cannot work: --device cuda without
// a usable device, --comm nccl on cpu or with ranks sharing a GPU, --precision bf16 on cpu. The
// attention kind is not checked against the head size here (check_cuda_attention does, once the
// model's shape is known).
rankscope::Result<DevicePlan> plan_device(const DeviceRequest& request, const DeviceProbe& probe,
                                          const HostPlacement& where);

}  // namespace gpt2
