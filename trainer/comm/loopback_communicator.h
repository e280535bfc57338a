// loopback_communicator.h — a Communicator of one rank, for single-process runs and tests.
//
// Is: every collective over a group of size 1 (copies where the operation moves data, nothing
// otherwise), so the trainer runs without MPI with the same code path as a multi-rank job.
// Is not: a simulator of several ranks; split() always yields another group of one.
#pragma once

#include <memory>
#include <string>

#include "communicator.h"

namespace gpt2 {

class LoopbackCommunicator final : public Communicator {
 public:
  explicit LoopbackCommunicator(std::string name = "world") : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override;
  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override;
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override;
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override;
  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override;
  Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                      std::span<const size_t> send_displs, void* recv,
                      std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                      DataType dtype) override;
  Status barrier() override { return {}; }
  std::unique_ptr<Communicator> split(const std::string& name, int color, int key) override;

 private:
  std::string name_;
};

}  // namespace gpt2
