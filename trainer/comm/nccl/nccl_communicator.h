// nccl_communicator.h — the NCCL implementation of gpt2::Communicator (leaf gpt2_comm_nccl).
//
// Is: all-reduce (sum, max), all-gather, reduce-scatter, broadcast, all-to-all and all-to-all-v
// (grouped ncclSend/ncclRecv), barrier, and split (ncclCommSplit) over GPU buffers, each collective on
// the communicator's own stream. Ordering with the compute: each call first makes the comm stream
// wait for everything already enqueued on `compute_stream` (pass cuda_ops_stream(ops) from
// ops/cuda/cuda_backend.h), and makes the compute stream wait for the collective, so the next op sees
// its result. With `host_synchronous` (the default) a call also returns only once the collective has
// finished on the GPU — the MPI communicator's semantics, "the result is in buf on return". Host
// pointers are accepted too (staged through device memory, always host-synchronous), so scalars such
// as a loss can be reduced without a device buffer of the caller's.
// The ncclUniqueId travels over `bootstrap` (the MPI world, when the job has MPI), else through
// <id_dir>/nccl_unique_id.<name> (unique_id_exchange.h).
// Is not: the probe reporting — wrap it in ProbedCommunicator (probed_communicator.h) like any backend.
//
// Hook for asynchronous completion (for the probe decorator, without changing it): with
// host_synchronous = false a call returns once the collective is enqueued; then
//   if (auto* nccl = as_nccl(inner_.get()))   // in ProbedCommunicator, on the wrapped backend
//     probe->collective_complete_when(handle, std::move(nccl->completion_of_last()).value());
// completion_of_last() records a CUDA event on the comm stream right after the last collective
// (rankscope_probe_cuda's CudaEventCompletion) that the probe's watchdog polls; comm_stream() is the
// stream itself for anyone who wants to record their own.
// No CUDA or NCCL header here (design rule 3): streams are CUstream_st* (= cudaStream_t).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "rankscope/format/status.h"
#include "rankscope/probe/probe.h"

struct CUstream_st;

namespace gpt2 {

struct NcclOptions {
  std::string name = "world";  // communicator name, as the probe and flight recorder show it
  int rank = 0;                // this process's rank in the new communicator
  int size = 1;
  int device = 0;              // CUDA device of this rank (usually local rank % devices)
  // Id transport: `bootstrap` when non-null (a host-memory communicator of the same ranks, e.g. MPI
  // world), else the file in `id_dir` keyed by `job_key` (use the run id), waited for `id_timeout`.
  Communicator* bootstrap = nullptr;
  std::filesystem::path id_dir;
  std::string job_key;
  std::chrono::milliseconds id_timeout{std::chrono::minutes(2)};
  CUstream_st* compute_stream = nullptr;  // null: the whole device is synchronized before each call
  bool host_synchronous = true;
};

class NcclCommunicator : public Communicator {
 public:
  // The stream every collective of this communicator runs on.
  virtual CUstream_st* comm_stream() const = 0;
  // Completes when everything enqueued on comm_stream() so far (the last collective) has finished.
  virtual rankscope::Result<std::unique_ptr<rankscope::probe::CompletionSource>> completion_of_last() = 0;
  // NCCL's asynchronous error state of the communicator (a peer failed, a network error): ok if none.
  virtual Status async_error() = 0;
};

// ncclCommInitRank after the id exchange. Collective over the `size` ranks.
rankscope::Result<std::unique_ptr<NcclCommunicator>> make_nccl_communicator(const NcclOptions& options);

// The NCCL communicator behind `comm`, or null when it is another backend.
NcclCommunicator* as_nccl(Communicator* comm);

// "NCCL 2.28.9" (ncclGetVersion; works without a GPU).
std::string nccl_version_string();

}  // namespace gpt2
