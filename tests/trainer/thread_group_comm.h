// thread_group_comm.h — an in-process Communicator for tests: N threads of one process form a group.
//
// Is: all-reduce (sum, max over fp32/fp64/int32), all-gather, reduce-scatter, broadcast,
// all-to-all, all-to-all-v and barrier by shared memory and std::barrier, so tensor-parallel equivalence
// (TP=2, TP=4 vs TP=1) runs in one gtest process without mpirun. Every rank computes a reduction
// in rank order, so all ranks get bit-identical results, as MPI's all-reduce gives. Each rank
// logs its all-reduces (op, count) so tests can check which collectives a phase issued.
// all_to_all_v fails on a receiver that expects a different count than its sender sends (it
// receives nothing then, where MPI would report truncation or a short message).
// Is not: a production backend (trainer/comm/ has MPI and loopback); split() is not offered.
#pragma once

#include <barrier>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "rankscope/format/bfloat16.h"

namespace gpt2::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), barrier_(size), send_(size), recv_(size) {}
  int size() const { return size_; }
  void sync() { barrier_.arrive_and_wait(); }
  std::vector<const void*>& send() { return send_; }
  std::vector<void*>& recv() { return recv_; }
  // all_to_all_v: each rank's send counts and displacements, published like send().
  std::vector<std::span<const size_t>>& send_counts() { return send_counts_; }
  std::vector<std::span<const size_t>>& send_displs() { return send_displs_; }

 private:
  int size_;
  std::barrier<> barrier_;
  std::vector<const void*> send_;
  std::vector<void*> recv_;
  std::vector<std::span<const size_t>> send_counts_{static_cast<size_t>(size_)};
  std::vector<std::span<const size_t>> send_displs_{static_cast<size_t>(size_)};
};

class ThreadGroupComm final : public Communicator {
 public:
  struct LoggedReduce {
    ReduceOp op;
    size_t count;
  };

  ThreadGroupComm(std::shared_ptr<ThreadGroup> group, int rank, std::string name)
      : group_(std::move(group)), rank_(rank), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  const std::vector<LoggedReduce>& reduce_log() const { return log_; }
  // Element counts of every all_gather since the last clear_log().
  const std::vector<size_t>& gather_log() const { return gather_log_; }
  void clear_log() {
    log_.clear();
    gather_log_.clear();
  }

  Status all_reduce(void* buf, size_t count, DataType dtype, ReduceOp op) override {
    log_.push_back({op, count});
    switch (dtype) {
      case DataType::kFloat32: return reduce_typed<float>(static_cast<float*>(buf), count, op);
      case DataType::kFloat64: return reduce_typed<double>(static_cast<double*>(buf), count, op);
      case DataType::kInt32: return reduce_typed<int32_t>(static_cast<int32_t*>(buf), count, op);
      case DataType::kBFloat16: return reduce_bf16(static_cast<uint16_t*>(buf), count, op);
      default: return rankscope::invalid_argument("ThreadGroupComm: unsupported dtype");
    }
  }
  Status all_gather(const void* send, void* recv, size_t count, DataType dtype) override {
    gather_log_.push_back(count);
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    group_->send()[rank_] = send;
    group_->sync();
    for (int r = 0; r < size(); r++) {
      std::memcpy(static_cast<char*>(recv) + r * bytes, group_->send()[r], bytes);
    }
    group_->sync();
    return Status::ok_status();
  }
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype) override {
    if (dtype != DataType::kFloat32) return rankscope::invalid_argument("ThreadGroupComm: fp32 only");
    group_->send()[rank_] = send;
    group_->sync();
    auto* out = static_cast<float*>(recv);
    for (size_t i = 0; i < recv_count; i++) {
      float acc = 0.0f;
      for (int r = 0; r < size(); r++) acc += static_cast<const float*>(group_->send()[r])[rank_ * recv_count + i];
      out[i] = acc;
    }
    group_->sync();
    return Status::ok_status();
  }
  Status broadcast(void* buf, size_t count, DataType dtype, int root) override {
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    group_->send()[rank_] = buf;
    group_->sync();
    if (rank_ != root) std::memcpy(buf, group_->send()[root], bytes);
    group_->sync();
    return Status::ok_status();
  }
  Status all_to_all(const void* send, void* recv, size_t count, DataType dtype) override {
    const size_t bytes = count * rankscope::format::dtype_size(dtype);
    group_->send()[rank_] = send;
    group_->sync();
    for (int r = 0; r < size(); r++) {
      std::memcpy(static_cast<char*>(recv) + r * bytes,
                  static_cast<const char*>(group_->send()[r]) + rank_ * bytes, bytes);
    }
    group_->sync();
    return Status::ok_status();
  }
  Status all_to_all_v(const void* send, std::span<const size_t> send_counts,
                      std::span<const size_t> send_displs, void* recv, std::span<const size_t> recv_counts,
                      std::span<const size_t> recv_displs, DataType dtype) override {
    const size_t elem = rankscope::format::dtype_size(dtype), n = static_cast<size_t>(size());
    if (send_counts.size() != n || send_displs.size() != n || recv_counts.size() != n || recv_displs.size() != n)
      return rankscope::invalid_argument("ThreadGroupComm all_to_all_v: one count and displacement per rank");
    group_->send()[rank_] = send;
    group_->send_counts()[rank_] = send_counts;
    group_->send_displs()[rank_] = send_displs;
    group_->sync();
    bool agree = true;  // what this rank expects from each sender against what that sender sends
    for (size_t src = 0; src < n; src++)
      if (group_->send_counts()[src][static_cast<size_t>(rank_)] != recv_counts[src]) agree = false;
    if (agree) {
      for (size_t src = 0; src < n; src++)
        std::memcpy(static_cast<char*>(recv) + recv_displs[src] * elem,
                    static_cast<const char*>(group_->send()[src]) +
                        group_->send_displs()[src][static_cast<size_t>(rank_)] * elem,
                    recv_counts[src] * elem);
    }
    group_->sync();
    if (!agree) return rankscope::internal_error("ThreadGroupComm all_to_all_v: receive count differs from the sender's");
    return Status::ok_status();
  }
  Status barrier() override {
    group_->sync();
    return Status::ok_status();
  }
  std::unique_ptr<Communicator> split(const std::string&, int, int) override { return nullptr; }

 private:
  // bf16 as NCCL does it: widened, reduced in fp32, rounded once.
  Status reduce_bf16(uint16_t* buf, size_t count, ReduceOp op) {
    std::vector<float> wide(count);
    for (size_t i = 0; i < count; i++) wide[i] = rankscope::format::bf16_to_float(buf[i]);
    RS_RETURN_IF_ERROR(reduce_typed<float>(wide.data(), count, op));
    for (size_t i = 0; i < count; i++) buf[i] = rankscope::format::float_to_bf16(wide[i]);
    return Status::ok_status();
  }
  template <class E>
  Status reduce_typed(E* buf, size_t count, ReduceOp op) {
    group_->send()[rank_] = buf;
    group_->sync();
    scratch_.resize(count * sizeof(E));
    E* out = reinterpret_cast<E*>(scratch_.data());
    for (size_t i = 0; i < count; i++) {
      E acc = static_cast<const E*>(group_->send()[0])[i];
      for (int r = 1; r < size(); r++) {
        E x = static_cast<const E*>(group_->send()[r])[i];
        acc = op == ReduceOp::kSum ? acc + x : (x > acc ? x : acc);
      }
      out[i] = acc;
    }
    group_->sync();  // everyone has read every input
    std::memcpy(buf, out, count * sizeof(E));
    return Status::ok_status();
  }

  std::shared_ptr<ThreadGroup> group_;
  int rank_;
  std::string name_;
  std::vector<char> scratch_;
  std::vector<LoggedReduce> log_;
  std::vector<size_t> gather_log_;
};

// Runs body(rank, comm) on `size` threads forming one group named `name`; joins them.
inline void run_thread_group(int size, const std::function<void(int, ThreadGroupComm&)>& body,
                             const std::string& name = "tp0") {
  auto group = std::make_shared<ThreadGroup>(size);
  std::vector<std::unique_ptr<ThreadGroupComm>> comms;
  for (int r = 0; r < size; r++) comms.push_back(std::make_unique<ThreadGroupComm>(group, r, name));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; r++) threads.emplace_back([&, r] { body(r, *comms[r]); });
  for (auto& t : threads) t.join();
}

}  // namespace gpt2::testing
