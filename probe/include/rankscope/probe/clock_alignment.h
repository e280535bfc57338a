// clock_alignment.h — estimates this rank's clock offset to rank 0 by NTP-style ping-pong.
//
// Is: the estimator and the exchange loop behind Probe::align_clocks, split out so they can be
// tested with a fake exchange of known skew and delay. One sample is (t1 local send, t2 rank 0's
// clock when it answered, t3 local receive); assuming symmetric delay, rank0 = local + offset with
// offset = t2 - (t1 + t3) / 2, and the error is at most half the round trip. The sample with the
// smallest round trip is kept (least queueing). Is not: a transport (ClockExchange, probe.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "rankscope/format/status.h"
#include "rankscope/probe/probe.h"

namespace rankscope::probe {

struct ClockSample {
  int64_t t1_ns = 0;  // local clock, ping sent
  int64_t t2_ns = 0;  // rank 0's clock, when it answered
  int64_t t3_ns = 0;  // local clock, reply received
};

struct ClockEstimate {
  int64_t offset_ns = 0;        // add to local times to get rank 0's clock
  int64_t uncertainty_ns = -1;  // half the best round trip; -1 when nothing was measured
  int64_t round_trip_ns = 0;
  uint32_t samples = 0;         // valid samples considered
};

// Picks the minimum-round-trip sample. Samples with a negative round trip are ignored; with none
// left the estimate has uncertainty -1 and samples 0.
ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples);

// Runs the exchange: every rank calls it together. Rank 0 answers `samples` pings from each other
// rank in rank order and returns offset 0, uncertainty 0. `now` is the local clock.
Result<ClockEstimate> measure_clock_offset(ClockExchange& exchange, int rank, int world_size,
                                           int samples, const std::function<int64_t()>& now);

}  // namespace rankscope::probe
