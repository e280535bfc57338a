// learned_bounds.h — how long a collective call site, or a step, normally takes, and the bound past
// which it is suspected stuck.
//
// Is: per key (a (communicator, call site) pair, or the step), a window of the most recent
// durations and a statistic of it, times a safety factor, never below a floor:
//   - from `warmup` samples on: the robust quantile (p95 over the last 64 by default: a few slow
//     outliers do not move it, a lasting shift does);
//   - before that, from `early` samples on (default 1): the longest sample seen. With a handful of
//     samples no quantile can be estimated, and the longest is the conservative reading; the factor
//     and the floor are the margin for noise. This is what lets a hang at step 2 be called in
//     seconds instead of waiting for ten samples;
//   - before any regular sample: a start-up sample (the step's first duration, which carries
//     init, warm-up and first touch and so is longer than a normal step) stands in, so that step 1
//     has a bound too. It never enters the window.
// Owned by one thread (the probe's watchdog): no locks, no atomics; allocation only when a new key
// appears. Is not: the detection loop (probe_watchdog.cpp) or the flight-recorder encoding (format/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace rankscope::probe {

struct BoundPolicy {
  double floor_s = 3.0;         // never suspect anything sooner than this
  double factor = 10.0;         // bound = max(floor, factor x statistic)
  uint32_t warmup = 10;         // samples before the robust quantile replaces the longest sample
  uint32_t early = 1;           // samples (the start-up one included) before any bound is armed
  uint32_t window = 64;         // recent durations the quantile is taken over
  uint32_t quantile_permille = 950;
};

class DurationBound {
 public:
  // What the bound currently rests on.
  enum class Basis { kNone, kStartup, kLongest, kQuantile };

  explicit DurationBound(const BoundPolicy& policy) : policy_(policy) { recent_.reserve(policy.window); }

  void add(int64_t duration_ns) {
    if (duration_ns < 0) return;
    if (recent_.size() < policy_.window) recent_.push_back(duration_ns);
    else recent_[next_] = duration_ns;
    next_ = (next_ + 1) % policy_.window;
    ++samples_;
    longest_ = std::max(longest_, duration_ns);
    dirty_ = true;
  }
  // A duration that includes start-up costs: a bound only until the first regular sample.
  void add_startup(int64_t duration_ns) {
    if (duration_ns > 0) startup_ns_ = duration_ns;
  }
  uint32_t samples() const { return samples_; }
  Basis basis() const {
    if (samples_ > 0 && samples_ >= policy_.warmup) return Basis::kQuantile;
    const uint32_t seen = samples_ + (startup_ns_ > 0 ? 1 : 0);
    if (seen == 0 || seen < policy_.early) return Basis::kNone;
    return samples_ > 0 ? Basis::kLongest : Basis::kStartup;
  }
  bool armed() const { return basis() != Basis::kNone; }
  // Which statistic the bound rests on, in permille: the policy's quantile, 1000 for the longest
  // sample (and the start-up one), 0 while unarmed. Published as BoundSlot.quantile_permille.
  uint32_t statistic_permille() const {
    switch (basis()) {
      case Basis::kQuantile: return policy_.quantile_permille;
      case Basis::kNone: return 0;
      default: return 1000;
    }
  }
  // The duration the bound is factor x: the quantile, the longest sample or the start-up sample.
  int64_t statistic_ns() const {
    switch (basis()) {
      case Basis::kQuantile: return quantile_ns();
      case Basis::kLongest: return longest_;
      case Basis::kStartup: return startup_ns_;
      case Basis::kNone: return quantile_ns();
    }
    return 0;
  }
  // The quantile of the recent window (0 when empty); recomputed lazily.
  int64_t quantile_ns() const {
    if (dirty_) {
      scratch_ = recent_;
      if (!scratch_.empty()) {
        const size_t k = size_t(double(scratch_.size() - 1) * policy_.quantile_permille / 1000.0);
        std::nth_element(scratch_.begin(), scratch_.begin() + long(k), scratch_.end());
        quantile_ = scratch_[k];
      }
      dirty_ = false;
    }
    return quantile_;
  }
  // Suspected stuck past this; 0 while no bound is armed.
  int64_t bound_ns() const {
    if (!armed()) return 0;
    const double floor_ns = policy_.floor_s * 1e9;
    return int64_t(std::max(floor_ns, policy_.factor * double(statistic_ns())));
  }
  const BoundPolicy& policy() const { return policy_; }

 private:
  BoundPolicy policy_;
  std::vector<int64_t> recent_;
  size_t next_ = 0;
  uint32_t samples_ = 0;
  int64_t longest_ = 0;      // of every sample: used only before `warmup`, when the window holds them all
  int64_t startup_ns_ = 0;
  mutable std::vector<int64_t> scratch_;
  mutable int64_t quantile_ = 0;
  mutable bool dirty_ = false;
};

}  // namespace rankscope::probe
