// ddp_reducer.cpp — bucket readiness, in-order launch, and the communication thread.
#include "ddp_reducer.h"

namespace gpt2 {

DdpReducer::DdpReducer(ParameterSet& params, Communicator& dp, rankscope::probe::Probe* probe,
                       GradDropFn drop, size_t bucket_bytes, size_t first_bucket_bytes,
                       Communicator* expert_dp)
    : params_(params), dp_(dp), expert_dp_(expert_dp ? *expert_dp : dp), probe_(probe), drop_(std::move(drop)) {
  buckets_ = plan_ddp_buckets(params_.infos(), bucket_of_, bucket_bytes, first_bucket_bytes);
  handles_.resize(params_.count());
  if (probe_) {
    for (size_t i = 0; i < params_.count(); ++i) {
      const ParamInfo& info = params_.infos()[i];
      handles_[i] = probe_->register_param(info.name, info.numel, bucket_of_[i]);
    }
  }
  pending_.resize(buckets_.size());
  if (dp_.size() > 1) comm_thread_ = std::thread([this] { comm_loop(); });
}

DdpReducer::~DdpReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (comm_thread_.joinable()) comm_thread_.join();
}

void DdpReducer::begin_backward(bool sync) {
  sync_ = sync && dp_.size() > 1;
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = static_cast<int>(buckets_[b].params.size());
  next_launch_ = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reduced_ = 0;
    comm_status_ = {};
  }
  if (probe_) probe_->begin_backward();
}

void DdpReducer::on_grad_ready(int param) {
  if (drop_ && drop_(params_.infos()[param].name)) return;  // never final: its bucket never launches
  if (probe_) probe_->grad_ready(handles_[param]);
  --pending_[bucket_of_[param]];
  if (!sync_) return;
  // Launch in the fixed order: a ready bucket waits for all earlier ones to launch.
  int launched_to = next_launch_;
  while (launched_to < static_cast<int>(buckets_.size()) && pending_[launched_to] == 0) ++launched_to;
  if (launched_to == next_launch_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int b = next_launch_; b < launched_to; ++b) queue_.push_back(b);
  }
  next_launch_ = launched_to;
  cv_.notify_all();
}

Status DdpReducer::finish_backward() {
  if (sync_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return reduced_ == static_cast<int>(buckets_.size()) || !comm_status_.ok(); });
    if (!comm_status_.ok()) {
      Status s = comm_status_;
      lock.unlock();
      if (probe_) probe_->end_backward();
      return s;
    }
  }
  if (probe_) probe_->end_backward();
  return {};
}

void DdpReducer::comm_loop() {
  for (;;) {
    int b = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      b = queue_.front();
      queue_.pop_front();
    }
    const DdpBucket& bucket = buckets_[b];
    // A range on this thread, so the recorder and the event stream say what the collective is for.
    rankscope::probe::ScopedRange range(probe_, "grad_sync/bucket");
    Communicator& group = bucket.expert ? expert_dp_ : dp_;
    Status s = group.size() > 1 ? group.all_reduce(params_.grads() + bucket.offset, bucket.numel,
                                                   DataType::kFloat32, ReduceOp::kSum)
                                : Status{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++reduced_;
      if (!s.ok() && comm_status_.ok()) comm_status_ = s;
    }
    cv_.notify_all();
  }
}

}  // namespace gpt2
