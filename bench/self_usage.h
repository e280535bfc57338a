// self_usage.h — this process's CPU seconds and peak resident memory (getrusage), the two numbers
// every benchmark prints beside its wall time.
#pragma once

#include <sys/resource.h>

namespace rankscope::bench {

struct ProcessUsage {
  double cpu_s = 0;     // user + system
  double peak_mib = 0;  // ru_maxrss
};

inline ProcessUsage self_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6,
          double(u.ru_maxrss) / 1024.0};
}

}  // namespace rankscope::bench
