// communicator.h — the one interface every collective of the trainer goes through.
//
// Is: all-reduce (sum, max), all-gather, reduce-scatter, broadcast, all-to-all(v), barrier over a
// group of ranks, implemented by MPI (CPU), NCCL (GPU) and a single-process loopback. Every
// implementation reports each call to the probe (enqueue/start/complete with its communicator name
// and sequence number), which is what hangdoctor and the skew report read.
// Is not: a tensor library. Buffers are raw pointers with an element count and a DataType.
// Groups: TP groups are consecutive ranks, DP groups strided (Megatron): see parallel/layout.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rankscope/format/status.h"
#include "rankscope/format/vocabulary.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

using rankscope::Status;
using rankscope::format::DataType;

enum class ReduceOp { kSum, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const std::string& name() const = 0;  // "world", "tp0", "dp1"
  virtual int rank() const = 0;                 // rank within this communicator
  virtual int size() const = 0;

  // In place: buf holds count elements on every rank, the reduction on return.
  virtual Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) = 0;
  // send holds count elements; recv holds count * size(), rank-major.
  virtual Status all_gather(const void* send, void* recv, size_t count, DataType dtype) = 0;
  // send holds recv_count * size() elements; recv gets this rank's reduced block.
  virtual Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) = 0;
  virtual Status broadcast(void* buf, size_t count, DataType dtype, int root) = 0;
  // Equal blocks of count elements to and from every rank.
  virtual Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) = 0;
  // Per-peer counts and displacements in elements.
  virtual Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                              std::span<const size_t> send_displs, void* recv,
                              std::span<const size_t> recv_counts,
                              std::span<const size_t> recv_displs, DataType dtype) = 0;
  virtual Status barrier() = 0;

  // After a call that returned ok: how to learn that it finished on the device, when the backend
  // returned with the collective only enqueued (NCCL on a stream, not host-synchronous); null when
  // it was complete on return (MPI, loopback). ProbedCommunicator hands it to the probe's watchdog,
  // so "enqueued on the GPU, never finished there" is told apart from "never reached by the host".
  virtual std::unique_ptr<rankscope::probe::CompletionSource> take_pending_completion() { return nullptr; }
  // True when calls return with the collective only enqueued on a stream: the probe then marks
  // it started when the device gets to it (take_pending_start, taken before the completion), not
  // when the host calls.
  virtual bool stream_ordered() const { return false; }
  virtual std::unique_ptr<rankscope::probe::CompletionSource> take_pending_start() { return nullptr; }

  // MPI_Comm_split semantics: ranks passing the same `color` form one new communicator, ordered
  // by `key`, named `name` (e.g. "tp0"). Collective over this communicator.
  virtual std::unique_ptr<Communicator> split(const std::string& name, int color, int key) = 0;
};

}  // namespace gpt2
