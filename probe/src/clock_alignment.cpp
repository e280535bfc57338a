// clock_alignment.cpp — the ping-pong loop and the minimum-round-trip estimator.
#include "rankscope/probe/clock_alignment.h"

#include <limits>
#include <vector>

#include <fmt/format.h>

namespace rankscope::probe {

ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples) {
  ClockEstimate best;
  int64_t best_rtt = std::numeric_limits<int64_t>::max();
  for (const ClockSample& s : samples) {
    int64_t rtt = s.t3_ns - s.t1_ns;
    if (rtt < 0) continue;  // local clock stepped backwards during the sample
    ++best.samples;
    if (rtt < best_rtt) {
      best_rtt = rtt;
      // (t1 + t3) / 2 written to avoid overflow of the sum of two epoch-ns values.
      int64_t midpoint = s.t1_ns + rtt / 2;
      best.offset_ns = s.t2_ns - midpoint;
      best.round_trip_ns = rtt;
      best.uncertainty_ns = (rtt + 1) / 2;
    }
  }
  return best;
}

Result<ClockEstimate> measure_clock_offset(ClockExchange& exchange, int rank, int world_size,
                                           int samples, const std::function<int64_t()>& now) {
  if (samples <= 0) return invalid_argument(fmt::format("clock alignment needs samples > 0, got {}", samples));
  if (rank < 0 || rank >= world_size) {
    return invalid_argument(fmt::format("clock alignment: rank {} outside world of {}", rank, world_size));
  }
  exchange.barrier();
  ClockEstimate estimate;
  if (rank == 0) {
    for (int peer = 1; peer < world_size; ++peer) {
      for (int i = 0; i < samples; ++i) exchange.serve(peer);
    }
    estimate.offset_ns = 0;
    estimate.uncertainty_ns = 0;
    estimate.samples = static_cast<uint32_t>(samples);
  } else {
    std::vector<ClockSample> taken(static_cast<size_t>(samples));
    for (ClockSample& s : taken) {
      s.t1_ns = now();
      s.t2_ns = exchange.ping_root(s.t1_ns);
      s.t3_ns = now();
    }
    estimate = estimate_clock_offset(taken);
  }
  exchange.barrier();
  if (estimate.samples == 0) {
    return internal_error("clock alignment: every sample had a negative round trip (clock stepped?)");
  }
  return estimate;
}

}  // namespace rankscope::probe
