// probed_communicator.h — a Communicator decorator that reports every call to the probe.
//
// Is: the ONE place where collectives meet the probe: the wrapped communicator is registered
// (name, size, rank) on construction, and each call is enqueued, started and completed (or failed)
// with its op, dtype, element count, bytes and peer/root, under the per-communicator sequence
// number that matches across ranks. It also consults an optional CollectiveInterceptor (fault
// injection) before each call. Communicators from split() are wrapped the same way.
// Is not: a backend; MPI, NCCL and loopback stay unaware of the probe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "collective_interceptor.h"
#include "communicator.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

class ProbedCommunicator final : public Communicator {
 public:
  // probe and interceptor may be null; both must outlive this communicator and its splits.
  ProbedCommunicator(std::unique_ptr<Communicator> inner, rankscope::probe::Probe* probe,
                     CollectiveInterceptor* interceptor);

  const std::string& name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override;
  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override;
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override;
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override;
  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override;
  Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                      std::span<const size_t> send_displs, void* recv,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                      DataType dtype) override;
  Status barrier() override;
  std::unique_ptr<Communicator> split(const std::string& name, int color, int key) override;

  // Collectives issued so far (the next call's sequence number).
  uint64_t issued() const { return next_seq_; }

 private:
  // send_counts / recv_counts: all_to_all_v's per-peer counts, kept in the flight recorder.
  template <class Run>
  Status run(rankscope::format::CollectiveOp op, DataType dtype, size_t count, int peer, Run&& body,
             std::span<const size_t> send_counts = {}, std::span<const size_t> recv_counts = {});

  std::unique_ptr<Communicator> inner_;
  rankscope::probe::Probe* probe_;
  CollectiveInterceptor* interceptor_;
  rankscope::probe::CommHandle handle_;
  uint64_t next_seq_ = 0;
};

}  // namespace gpt2
