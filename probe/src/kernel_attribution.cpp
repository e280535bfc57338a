// kernel_attribution.cpp — calibration of a tracer clock against the probe clock.
#include "rankscope/probe/kernel_attribution.h"

#include <limits>

namespace rankscope::probe {

TimestampConverter TimestampConverter::calibrate(const std::function<int64_t()>& tracer_now,
                                                 const std::function<int64_t()>& our_now, int rounds) {
  int64_t best_bracket = std::numeric_limits<int64_t>::max();
  int64_t best_offset = 0;
  for (int i = 0; i < rounds; ++i) {
    int64_t before = our_now();
    int64_t theirs = tracer_now();
    int64_t after = our_now();
    int64_t bracket = after - before;
    if (bracket < 0) continue;  // our clock stepped: discard the pair
    if (bracket < best_bracket) {
      best_bracket = bracket;
      best_offset = before + bracket / 2 - theirs;
    }
  }
  return TimestampConverter(best_offset);
}

}  // namespace rankscope::probe
