// clock.h — the one clock every rankscope timestamp uses.
#pragma once

#include <cstdint>

namespace rankscope {

// Nanoseconds since the Unix epoch (CLOCK_REALTIME): comparable across processes on a host and,
// with the recorded offsets, across hosts.
int64_t now_unix_ns();

// For turning those nanoseconds into the seconds and milliseconds reports print.
inline constexpr double kNsPerSecond = 1e9;
inline constexpr double kNsPerMillisecond = 1e6;

}  // namespace rankscope
