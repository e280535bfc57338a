// units.h — ns to the units the kernels report shows (internal; shared by JSON and text).
#pragma once

#include <cstdint>

namespace rankscope::analyzers::device_timeline {

inline double ms(int64_t ns) { return double(ns) / 1e6; }
inline double us(int64_t ns) { return double(ns) / 1e3; }

}  // namespace rankscope::analyzers::device_timeline
