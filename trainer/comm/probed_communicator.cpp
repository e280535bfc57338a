// probed_communicator.cpp — probe reporting and the fault seam around every collective.
//
// Order of one call: interceptor (may skip, resize, stall, crash) -> probe enqueue+start ->
// interceptor payload hook (lossy) -> the backend -> probe complete (failed when the backend said
// no). A resized call moves a scratch buffer of the new size, so a larger count never reads or
// writes past the caller's memory.
#include "probed_communicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "rankscope/format/flight_recorder_writer.h"

namespace gpt2 {

using rankscope::format::CollectiveDesc;
using rankscope::format::CollectiveOp;
using rankscope::format::dtype_size;

ProbedCommunicator::ProbedCommunicator(std::unique_ptr<Communicator> inner,
                                       rankscope::probe::Probe* probe,
                                       CollectiveInterceptor* interceptor)
    : inner_(std::move(inner)), probe_(probe), interceptor_(interceptor) {
  if (probe_) handle_ = probe_->register_comm(inner_->name(), inner_->size(), inner_->rank());
}

template <class Run>
Status ProbedCommunicator::run(CollectiveOp op, DataType dtype, size_t count, int peer, Run&& body,
                               std::span<const size_t> send_counts, std::span<const size_t> recv_counts) {
  CollectiveCall call{inner_->name(), next_seq_, op, dtype, count};
  InterceptDecision decision;
  if (interceptor_) decision = interceptor_->before_collective(call);
  if (decision.skip) return {};
  call.count = decision.count.value_or(count);

  rankscope::probe::CollectiveHandle h;
  if (probe_) {
    CollectiveDesc desc;
    desc.op = op;
    desc.dtype = dtype;
    desc.count = call.count;
    desc.bytes = call.count * dtype_size(dtype);
    desc.peer = peer;
    desc.send_counts = send_counts;
    desc.recv_counts = recv_counts;
    h = probe_->collective_enqueue(handle_, desc);
    // Blocking CPU collectives start when they are called; stream-ordered ones when the device
    // reaches them (below).
    if (!inner_->stream_ordered()) probe_->collective_start(h);
  }
  ++next_seq_;
  Status status = body(call);
  if (probe_) {
    // Asynchronous backends (NCCL) return with the collective only enqueued on a stream.
    if (auto started = status.ok() ? inner_->take_pending_start() : nullptr)
      probe_->collective_start_when(h, std::move(started));
    if (auto pending = status.ok() ? inner_->take_pending_completion() : nullptr)
      probe_->collective_complete_when(h, std::move(pending));
    else
      probe_->collective_complete(h, !status.ok());
  }
  return status;
}

namespace {

// The bytes a rank sends in one call of `count` elements, either the caller's buffer or, when the
// count was changed or the payload may be damaged, a private copy of the right size.
class Outgoing {
 public:
  Outgoing(const void* data, size_t count, size_t want, size_t elem, bool need_copy) {
    if (want == count && !need_copy) {
      ptr_ = const_cast<void*>(data);
      return;
    }
    copy_.assign(want * elem, 0);
    std::memcpy(copy_.data(), data, std::min(count, want) * elem);
    ptr_ = copy_.data();
  }
  void* data() { return ptr_; }

 private:
  std::vector<unsigned char> copy_;
  void* ptr_ = nullptr;
};

// Where a collective writes: the caller's buffer, or scratch of the new size copied back after.
class Incoming {
 public:
  Incoming(void* data, size_t count, size_t want, size_t elem)
      : data_(data), bytes_(count * elem), want_bytes_(want * elem) {
    if (want_bytes_ != bytes_) scratch_.assign(want_bytes_, 0);
  }
  void* data() { return scratch_.empty() ? data_ : scratch_.data(); }
  void finish() {
    if (!scratch_.empty()) std::memcpy(data_, scratch_.data(), std::min(bytes_, want_bytes_));
  }

 private:
  void* data_;
  size_t bytes_;
  size_t want_bytes_;
  std::vector<unsigned char> scratch_;
};

CollectiveOp reduce_op(ReduceOp op) {
  return op == ReduceOp::kSum ? CollectiveOp::kAllReduceSum : CollectiveOp::kAllReduceMax;
}

}  // namespace

Status ProbedCommunicator::all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) {
  return run(reduce_op(op), dtype, count, -1, [&](const CollectiveCall& call) {
    const size_t elem = dtype_size(dtype);
    Incoming io(buf, count, call.count, elem);
    if (io.data() != buf) std::memcpy(io.data(), buf, std::min(count, call.count) * elem);
    if (interceptor_) interceptor_->on_payload(call, io.data(), call.count * elem);
    Status s = inner_->all_reduce(io.data(), call.count, dtype, op);
    io.finish();
    return s;
  });
}

Status ProbedCommunicator::all_gather(const void* send, void* recv, size_t count, DataType dtype) {
  return run(CollectiveOp::kAllGather, dtype, count, -1, [&](const CollectiveCall& call) {
    const size_t elem = dtype_size(dtype);
    Outgoing out(send, count, call.count, elem, interceptor_ != nullptr);
    if (interceptor_) interceptor_->on_payload(call, out.data(), call.count * elem);
    Incoming in(recv, count * size(), call.count * size(), elem);
    Status s = inner_->all_gather(out.data(), in.data(), call.count, dtype);
    in.finish();
    return s;
  });
}

Status ProbedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                          DataType dtype) {
  return run(CollectiveOp::kReduceScatter, dtype, recv_count, -1, [&](const CollectiveCall& call) {
    const size_t elem = dtype_size(dtype);
    Outgoing out(send, recv_count * size(), call.count * size(), elem, interceptor_ != nullptr);
    if (interceptor_) interceptor_->on_payload(call, out.data(), call.count * size() * elem);
    Incoming in(recv, recv_count, call.count, elem);
    Status s = inner_->reduce_scatter(out.data(), in.data(), call.count, dtype);
    in.finish();
    return s;
  });
}

Status ProbedCommunicator::broadcast(void* buf, size_t count, DataType dtype, int root) {
  return run(CollectiveOp::kBroadcast, dtype, count, root, [&](const CollectiveCall& call) {
    const size_t elem = dtype_size(dtype);
    Incoming io(buf, count, call.count, elem);
    if (io.data() != buf) std::memcpy(io.data(), buf, std::min(count, call.count) * elem);
    Status s = inner_->broadcast(io.data(), call.count, dtype, root);
    io.finish();
    return s;
  });
}

Status ProbedCommunicator::all_to_all(const void* send, void* recv, size_t count, DataType dtype) {
  return run(CollectiveOp::kAllToAll, dtype, count, -1, [&](const CollectiveCall& call) {
    const size_t elem = dtype_size(dtype);
    Outgoing out(send, count * size(), call.count * size(), elem, false);
    Incoming in(recv, count * size(), call.count * size(), elem);
    Status s = inner_->all_to_all(out.data(), in.data(), call.count, dtype);
    in.finish();
    return s;
  });
}

Status ProbedCommunicator::all_to_all_v(const void* send, std::span<const size_t> send_counts,
                                        std::span<const size_t> send_displs, void* recv,
                                        std::span<const size_t> recv_counts,
                                        std::span<const size_t> recv_displs, DataType dtype) {
  size_t total = 0;
  for (size_t c : send_counts) total += c;
  // Per-peer counts cannot be rescaled meaningfully: a resize fault leaves this call alone. The
  // counts as passed to the backend go to the flight recorder, so hangdoctor can check them across
  // ranks (send_i[j] == recv_j[i]) even while the call hangs.
  return run(
      CollectiveOp::kAllToAllV, dtype, total, -1,
      [&](const CollectiveCall&) {
        return inner_->all_to_all_v(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype);
      },
      send_counts, recv_counts);
}

Status ProbedCommunicator::barrier() {
  return run(CollectiveOp::kBarrier, DataType::kUnknown, 0, -1,
             [&](const CollectiveCall&) { return inner_->barrier(); });
}

std::unique_ptr<Communicator> ProbedCommunicator::split(const std::string& name, int color, int key) {
  auto sub = inner_->split(name, color, key);
  if (!sub) return nullptr;
  return std::make_unique<ProbedCommunicator>(std::move(sub), probe_, interceptor_);
}

}  // namespace gpt2
