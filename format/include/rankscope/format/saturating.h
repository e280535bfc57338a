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

// a * b, held the same way (a time in ms from a file, made ns).
inline int64_t mul_saturating(int64_t a, int64_t b) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return (a < 0) == (b < 0) ? INT64_MAX : INT64_MIN;
  return product;
}

// a * b / d with the product in 128 bits, held at the ends (a bin of a span of steps or times from a
// file: the product need not fit in 64 bits even when the quotient does). d must not be 0.
inline int64_t mul_div_saturating(int64_t a, int64_t b, int64_t d) {
  __extension__ typedef __int128 int128;
  const int128 q = int128(a) * int128(b) / int128(d);
  return q > int128(INT64_MAX) ? INT64_MAX : q < int128(INT64_MIN) ? INT64_MIN : int64_t(q);
}

// The same rounded up, for a >= 0, b >= 0, d > 0 (the first item of bin a of d bins over b items).
inline int64_t mul_div_up_saturating(int64_t a, int64_t b, int64_t d) {
  __extension__ typedef __int128 int128;
  const int128 q = (int128(a) * int128(b) + int128(d) - 1) / int128(d);
  return q > int128(INT64_MAX) ? INT64_MAX : q < int128(INT64_MIN) ? INT64_MIN : int64_t(q);
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
