// fault_injector.h — the fault points: where --inject specs act on a running rank.
//
// Is: one object holding this rank's faults, reached through exactly two seams, so no fault logic
// sits in the model or the communicators:
//   - range entry: the probe forwards every push_range to range_sink() (a probe RangeSink), which
//     runs stall, delay, crash and gpu-stall (through the device hook the trainer installs);
//   - collective call: ProbedCommunicator asks before_collective()/on_payload() (skip, resize,
//     lossy; it is a CollectiveInterceptor);
// plus the one question DDP asks before it reports a gradient ready (drop-grad), and two the
// trainer asks of MoE runs: the router logit bias (route-skew) and, per step, wrong combine
// receive counts (a2a-miscount), which it hands to the model. The training loop
// tells it the current step. Lossy counts chunks sent and lost as probe counters
// (lossy.chunks_sent, lossy.chunks_lost).
// Is not: the parser (fault_spec.h) nor the checks that faults did what they say (tests/e2e).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "comm/collective_interceptor.h"
#include "fault_spec.h"
#include "loss_model.h"
#include "model/config.h"  // plain structs only: faults do not link the model
#include "rankscope/probe/probe.h"

namespace gpt2 {

class FaultInjector final : public CollectiveInterceptor {
 public:
  // Keeps the specs that apply to `rank`. probe may be null (then lossy counts are not reported).
  FaultInjector(std::vector<FaultSpec> specs, int rank, rankscope::probe::Probe* probe);

  bool empty() const { return specs_.empty(); }
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }

  // Called on entering a range (any thread): may sleep, block forever or SIGKILL the process.
  void on_range_enter(std::string_view name);
  // A probe RangeSink forwarding to on_range_enter; the injector must outlive it.
  std::unique_ptr<rankscope::probe::RangeSink> range_sink();

  // How gpu-stall reaches the device: enqueue a kernel spinning `seconds` on the compute stream.
  // Installed by the trainer when it runs on a GPU; without it, gpu-stall is refused at start-up.
  using GpuStallHook = std::function<rankscope::Status(double seconds)>;
  void set_gpu_stall_hook(GpuStallHook hook) { gpu_stall_ = std::move(hook); }
  bool wants_gpu() const;

  // True when `param`'s gradient must not be reported ready at the current step.
  bool drop_grad(std::string_view param) const;

  // route-skew: the router logit bias (E values) every MoE block adds, or empty when none.
  std::vector<float> router_logit_bias(const MoeConfig& moe) const;
  // a2a-miscount: the wrong combine receive counts this rank uses at `step` (peer -1: none). The
  // peer is the lowest EP rank other than ep_rank (rank 1 of the incident expected rows from 0).
  CombineMiscount combine_miscount(int64_t step, int ep_rank) const;

  InterceptDecision before_collective(const CollectiveCall& call) override;
  void on_payload(const CollectiveCall& call, void* payload, size_t bytes) override;

 private:
  bool step_matches(const FaultSpec& f) const { return f.step < 0 || f.step == step(); }

  std::vector<FaultSpec> specs_;
  // Per spec: a one-shot fault (skip, resize) has acted. After a skip the next call carries the
  // same sequence number, so without this it would be skipped too. One char per spec: the main
  // and the DDP thread touch different specs (different communicators), never the same element.
  std::vector<char> fired_;
  std::vector<LossModelState> lossy_;   // one per lossy spec, in spec order
  std::vector<const FaultSpec*> lossy_specs_;
  int rank_;
  rankscope::probe::Probe* probe_;
  GpuStallHook gpu_stall_;
  std::atomic<int64_t> step_{-1};
};

}  // namespace gpt2
