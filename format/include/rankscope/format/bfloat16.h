// bfloat16.h — bf16 on the host: conversion to and from fp32, bit-exact with CUDA's
// __float2bfloat16_rn / __bfloat162float. Header-only; the lowest layer, so the trainer's model,
// its communicators and tests all use the same rounding.
// Is not: a bf16 arithmetic type (compute in fp32, store rounded).
#pragma once

#include <cstdint>
#include <cstring>

namespace rankscope::format {

// The upper 16 bits of an fp32, rounded to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

}  // namespace rankscope::format
