// learned_bounds.h — how long a collective call site, or a step, normally takes, and the bound past
// which it is suspected stuck.
//
// Is: per key (a (communicator, call site) pair, or the step), a window of the most recent
// durations and a robust quantile of it (p95 over the last 64 by default: a few slow outliers do
// not move it, a lasting shift does). The bound is max(floor, factor x quantile), armed only after
// `warmup` samples; until then only the fixed watchdog timeout applies. Owned by one thread (the
// probe's watchdog): no locks, no atomics; allocation only when a new key appears.
// Is not: the detection loop (probe_watchdog.cpp) or the flight-recorder encoding (format/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace rankscope::probe {

struct BoundPolicy {
  double floor_s = 3.0;         // never suspect anything sooner than this
  double factor = 10.0;         // bound = max(floor, factor x quantile)
  uint32_t warmup = 10;         // samples before a bound is armed
  uint32_t window = 64;         // recent durations the quantile is taken over
  uint32_t quantile_permille = 950;
};

class DurationBound {
 public:
  explicit DurationBound(const BoundPolicy& policy) : policy_(policy) { recent_.reserve(policy.window); }

  void add(int64_t duration_ns) {
    if (duration_ns < 0) return;
    if (recent_.size() < policy_.window) recent_.push_back(duration_ns);
    else recent_[next_] = duration_ns;
    next_ = (next_ + 1) % policy_.window;
    ++samples_;
    dirty_ = true;
  }
  uint32_t samples() const { return samples_; }
  bool armed() const { return samples_ >= policy_.warmup && !recent_.empty(); }
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
  // Suspected stuck past this; 0 while warming up.
  int64_t bound_ns() const {
    if (!armed()) return 0;
    const double floor_ns = policy_.floor_s * 1e9;
    return int64_t(std::max(floor_ns, policy_.factor * double(quantile_ns())));
  }
  const BoundPolicy& policy() const { return policy_; }

 private:
  BoundPolicy policy_;
  std::vector<int64_t> recent_;
  size_t next_ = 0;
  uint32_t samples_ = 0;
  mutable std::vector<int64_t> scratch_;
  mutable int64_t quantile_ = 0;
  mutable bool dirty_ = false;
};

}  // namespace rankscope::probe
