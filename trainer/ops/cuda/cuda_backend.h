// cuda_backend.h — the CUDA backend of gpt2::Ops as the rest of the trainer sees it: a device probe
// and a factory. Includes no CUDA header, so CPU-only code (trainer/train, tests) may include it.
//
// Is: probe_cuda_device() (is there a usable GPU, and if not, one line saying why) and
// make_cuda_ops() (the CUDA implementation of ops.h), plus small accessors the NCCL communicator and
// the GPU benchmark need (the ops' stream, memory counters, a synchronize).
// Is not: the implementation (cuda_ops*.cpp, kernels/*.cu); it exists in every build.
//
// How to use it (H3, trainer/train, --device auto|cpu|cuda and --precision bf16|fp32):
//   link `gpt2_ops_cuda_probe` — it ALWAYS exists. With nvcc at configure time it is the real
//   backend; without, probe_cuda_device() says "built without CUDA ..." and make_cuda_ops() fails
//   with kUnsupported, so the trainer links and degrades the same way on every machine:
//     gpt2::DeviceProbe dev = gpt2::probe_cuda_device();
//     if (device == "cuda" && !dev.usable) -> error: dev.reason
//     if (device == "auto") use_cuda = dev.usable;   print once: "rankscope: " + dev.reason +
//                                                    (use_cuda ? "" : "; using cpu")
//     auto ops = gpt2::make_cuda_ops({.device = local_rank % dev.device_count,
//                                     .precision = gpt2::parse_cuda_precision(flag).value()});
//   With CUDA ops every buffer the model hands to the Communicator is device memory: use the NCCL
//   communicator (trainer/comm/nccl/nccl_communicator.h), created with cuda_ops_stream(*ops) so that
//   collectives are ordered after the ops that produced their input.
// Errors inside an op (the Ops interface returns void) are fatal: the op prints the CUDA error with
// its breadcrumb and a hint, then aborts — a CUDA error leaves the context unusable anyway. Out of
// memory is the exception: a clear message and exit 2 (the trainer's up-front estimate,
// model/memory_estimate.h, normally stops such a run before the first allocation).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "model/ops.h"
#include "rankscope/format/status.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared, never defined here (design rule 3)

namespace gpt2 {

// What probe_cuda_device() found. `reason` is one line: when usable, "cuda device 0 of 1: NVIDIA
// H100 80GB HBM3 (sm_90, 79.1 GiB)"; when not, why, e.g. "no CUDA device (cudaGetDeviceCount: CUDA
// driver version is insufficient for CUDA runtime version)" or "built without CUDA (nvcc was not
// found at configure time)". Callers append what they fall back to ("; using cpu").
struct DeviceProbe {
  bool usable = false;
  bool built_with_cuda = false;
  int device_count = 0;
  int device = -1;           // the probed device index when usable
  std::string name;          // "NVIDIA H100 80GB HBM3"
  int compute_capability = 0;  // 90 for sm_90
  size_t memory_bytes = 0;
  std::string reason;
};

// Probes once per call (cheap after the first: the CUDA runtime caches the driver). `device` must be
// < device_count for the probe to say usable. Never aborts, never throws.
DeviceProbe probe_cuda_device(int device = 0);

// GEMM precision of the CUDA backend. fp32: fp32 operands, fp32 accumulation (the mode tests compare
// with the CPU oracle). bf16: GEMM operands rounded to bf16, fp32 accumulation, fp32 outputs and fp32
// master weights; every other op stays fp32.
enum class CudaPrecision { kFp32, kBf16 };
rankscope::Result<CudaPrecision> parse_cuda_precision(std::string_view text);  // "fp32" | "bf16"
std::string_view cuda_precision_name(CudaPrecision precision);

// Whether the CUDA backend computes `kind` for heads of `head_size`: naive any, flash 32, 64 or 128
// (the sizes flash_attention.cu is instantiated for). The error names the sizes and --attention naive.
rankscope::Status check_cuda_attention(AttentionKind kind, int head_size);

struct CudaOpsOptions {
  int device = 0;
  CudaPrecision precision = CudaPrecision::kFp32;
  size_t gemm_workspace_bytes = size_t{32} << 20;  // cuBLASLt workspace
  // Flash attention on tensor cores where it applies (bf16 activations, head size 64); false keeps
  // the scalar kernels, the reference the GPU tests compare the tensor-core kernels with.
  bool attention_tensor_cores = true;
};

// Sets the device, creates the ops' stream and the cuBLASLt handle. Fails with the probe's reason
// when there is no usable device (kUnsupported when built without CUDA).
rankscope::Result<std::unique_ptr<Ops>> make_cuda_ops(const CudaOpsOptions& options = {});

// The stream every op of `ops` runs on (a cudaStream_t), or null when `ops` is not the CUDA backend.
CUstream_st* cuda_ops_stream(Ops& ops);

// Waits until every op enqueued so far has finished (for timing); ok and a no-op for other backends.
rankscope::Status cuda_ops_synchronize(Ops& ops);

struct CudaMemoryStats {
  size_t allocated_bytes = 0;       // alloc() minus release(), now
  size_t peak_allocated_bytes = 0;  // the high-water mark of allocated_bytes
  size_t scratch_bytes = 0;         // the backend's own scratch (attention, sort, partial sums, casts)
  size_t device_used_bytes = 0;     // cudaMemGetInfo: total - free, whole device (includes the context)
  size_t device_free_bytes = 0;     // cudaMemGetInfo: free
};
// kInvalidArgument when `ops` is not the CUDA backend.
rankscope::Result<CudaMemoryStats> cuda_ops_memory(Ops& ops);

// cudaProfilerStart / cudaProfilerStop, for --profile-steps A-B: `nsys profile -c cudaProfilerApi`
// then captures just those steps. kUnsupported when built without CUDA.
rankscope::Status cuda_profiler_start();
rankscope::Status cuda_profiler_stop();

// True when `ptr` is device (or managed) memory of any device: host staging (comm/
// host_staging_communicator.h) copies such buffers through host memory. False for every pointer
// in a build without CUDA.
bool is_cuda_device_pointer(const void* ptr);

// The `gpu-stall` fault: enqueues on the ops' stream one kernel that spins for `seconds` of GPU
// clock, so the host runs ahead while the GPU falls behind ("a hang in a kernel"). Returns at once.
// kInvalidArgument when `ops` is not the CUDA backend.
rankscope::Status cuda_ops_enqueue_spin(Ops& ops, double seconds);

}  // namespace gpt2
