// clock.cpp — CLOCK_REALTIME in nanoseconds.
#include "rankscope/format/clock.h"

#include <ctime>

namespace rankscope {

int64_t now_unix_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace rankscope
