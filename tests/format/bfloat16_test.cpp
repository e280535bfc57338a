// bfloat16_test.cpp — the host bf16 conversion rounds as the GPU does (nearest, ties to even), keeps
// infinities and NaN, and widens exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "rankscope/format/bfloat16.h"

namespace rankscope::format {
namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(BFloat16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000u)), 0x3F80) << "tie, even below";
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000u)), 0x3F82) << "tie, even above";
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001u)), 0x3F81) << "just above the tie";
  EXPECT_EQ(float_to_bf16(from_bits(0x3F807FFFu)), 0x3F80) << "just below the tie";
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7FFFFFu)), 0x7F80) << "the largest float rounds to infinity";
}

TEST(BFloat16, SpecialValuesAndWidening) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity())), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7F800001u))))) << "a NaN whose payload is in the low bits";
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const float x = bf16_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(x)) EXPECT_EQ(float_to_bf16(x), h) << "bf16 -> fp32 -> bf16 is the identity";
  }
  EXPECT_LE(std::fabs(bf16_to_float(float_to_bf16(3.14159265f)) - 3.14159265f), 3.14159265f / 256);
}

}  // namespace
}  // namespace rankscope::format
