// ddp_reducer.h — data-parallel gradient averaging, overlapped with backward.
//
// Is: PyTorch-DDP-style gradient sync over a DP communicator. Every parameter is registered with
// the probe (with its bucket). During backward the model's gradient-ready callback lands in
// on_grad_ready(): the parameter is reported to the probe (grad_ready) — unless fault injection
// drops it — and each bucket whose gradients are all final is handed, in the fixed bucket order,
// to a communication thread that all-reduces it (sum) while backward continues. wait() blocks
// until every bucket is reduced. Gradients are pre-scaled by 1/DP through the loss scale, so the
// sum is the mean. Only the last micro-step of gradient accumulation syncs.
// MoE expert buckets go over the expert-data-parallel group edp{m} instead (when given): an expert
// rank's gradient already sums the rows of its whole ep{k} group, each pre-scaled by 1/DP by its
// sender's loss scale, so the edp sum is the mean over all DP ranks, as DDP's dense sum is.
// Is not: TP reductions (inside the model) or the optimizer.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "model/parameters.h"
#include "parallel/ddp_buckets.h"
#include "rankscope/probe/probe.h"

namespace gpt2 {

// Asked before a gradient is reported ready; true means "never report it" (drop-grad fault).
using GradDropFn = std::function<bool(std::string_view param)>;

class DdpReducer {
 public:
  // dp may have size 1 (then nothing is reduced, gradients are still reported). probe may be
  // null. All three must outlive the reducer.
  // expert_dp: edp{m} for expert buckets; null means dp (EP 1: edp is dp).
  DdpReducer(ParameterSet& params, Communicator& dp, rankscope::probe::Probe* probe,
             GradDropFn drop = {}, size_t bucket_bytes = kDdpBucketBytes,
             size_t first_bucket_bytes = kDdpFirstBucketBytes, Communicator* expert_dp = nullptr);
  ~DdpReducer();
  DdpReducer(const DdpReducer&) = delete;
  DdpReducer& operator=(const DdpReducer&) = delete;

  const std::vector<DdpBucket>& buckets() const { return buckets_; }
  int bucket_of(int param) const { return bucket_of_[param]; }

  // Starts a backward pass; `sync` is true on the last micro-step (buckets are reduced).
  void begin_backward(bool sync);
  // The model's GradReadyFn.
  void on_grad_ready(int param);
  // Ends the pass: waits for every bucket's all-reduce when syncing. Blocks forever when a bucket
  // never became ready (a dropped gradient), as a real DDP rank would hang.
  Status finish_backward();

 private:
  void comm_loop();

  ParameterSet& params_;
  Communicator& dp_;
  Communicator& expert_dp_;
  rankscope::probe::Probe* probe_;
  GradDropFn drop_;
  std::vector<DdpBucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<rankscope::probe::ParamHandle> handles_;
  std::vector<int> pending_;   // per bucket: gradients not yet final in this pass
  int next_launch_ = 0;        // buckets launch strictly in order
  bool sync_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;      // buckets handed to the comm thread
  int reduced_ = 0;            // buckets reduced in this pass
  Status comm_status_;
  bool stop_ = false;
  std::thread comm_thread_;
};

}  // namespace gpt2
