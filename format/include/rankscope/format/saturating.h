// saturating.h — 64-bit arithmetic on numbers read from files, held at the ends instead of wrapping.
//
// Times and sequence numbers come from files other programs wrote (PyTorch's dumps, nsys and Kineto
// exports, logs), so any of them may be near INT64_MAX or INT64_MIN. Adding or subtracting two of
// them in plain int64 is then undefined behaviour and, in practice, a wrapped value: a wait of minus
// 292 years in a report. Every such site uses these instead: a value past an end stays at that end,
// the representable value nearest the truth. Not for hot loops over trusted numbers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace rankscope::format {

// a + b, held at INT64_MAX / INT64_MIN.
inline int64_t add_saturating(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}

// a - b, held the same way.
inline int64_t sub_saturating(int64_t a, int64_t b) {
  int64_t diff = 0;
  if (__builtin_sub_overflow(a, b, &diff)) return b < 0 ? INT64_MAX : INT64_MIN;
  return diff;
}

// |a - b|, held at INT64_MAX.
inline int64_t distance_saturating(int64_t a, int64_t b) { return sub_saturating(std::max(a, b), std::min(a, b)); }

// A double as int64, held at the ends (a double past them converts with undefined behaviour); NaN is 0.
inline int64_t int64_saturating(double v) {
  if (std::isnan(v)) return 0;
  if (v <= -0x1p63) return INT64_MIN;
  return v >= 0x1p63 ? INT64_MAX : int64_t(v);
}

}  // namespace rankscope::format
