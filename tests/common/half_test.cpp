#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace rlt {
namespace {

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);
  // 1 + 3*2^-8 ties to the even neighbour above.
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(Half, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    float f = f16_to_f32(v);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), v) << "h=" << h;
  }
}

TEST(Half, F16RoundsToNearestEvenAndOverflows) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway to the next binade rounds to inf
  EXPECT_EQ(f32_to_f16(1e-8f), 0x0000);     // below half the smallest subnormal
  EXPECT_EQ(f32_to_f16(6e-8f), 0x0001);     // nearest subnormal
  // 1 + 2^-11 ties between 1 and 1 + 2^-10: even mantissa wins.
  EXPECT_EQ(f32_to_f16(1.00048828125f), 0x3c00);
}

}  // namespace
}  // namespace rlt
