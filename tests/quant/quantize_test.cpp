// quantize_row against dequantize_row: the values come back within each type's step, on random
// rows of several magnitudes, rows with outliers, constant and zero rows. (Q8_0 is also compared
// with the gguf package's quantizer bit for bit in test_dequant_oracle.py.)
#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"
#include "quant/dequantize.h"

namespace rlt::quant {
namespace {

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(*ggml_row_bytes(type, n)));
  EXPECT_TRUE(quantize_row(type, x.data(), n, q.data()).ok());
  std::vector<float> y(x.size());
  EXPECT_TRUE(dequantize_row(type, q.data(), n, y.data()).ok());
  return y;
}

// The largest error a block may show: Q8_0 half a step of absmax/127 plus the f16 rounding of
// the scale over 127 steps (relative 2^-11, or 2^-25 absolute where d is an f16 subnormal); Q6_K
// about one step of absmax/32 per 16 values (8-bit sub-scales under the f16 super-scale); Q4_K one
// step of (max − min)/15 per 32 values (6-bit sub-scales and mins under f16 super-scales, the
// fitted scale may trade the extremes for the bulk).
double bound(GgmlType type, const float* x, int64_t block) {
  float lo = 0, hi = 0, amax = 0;
  for (int64_t i = 0; i < block; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  switch (type) {
    case GgmlType::kQ8_0: {
      const double d = amax / 127.0;
      return 0.5 * d + 127.0 * std::max(d * 0x1p-11, 0x1p-25);
    }
    case GgmlType::kQ6_K:
      return 1.5 * amax / 31;
    default:
      return 1.5 * (hi - lo) / 15;
  }
}

class QuantizeTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantizeTest, RoundTripStaysWithinAStep) {
  const GgmlType type = GetParam();
  const int64_t block = type == GgmlType::kQ8_0 ? 32 : type == GgmlType::kQ6_K ? 16 : 32;
  std::mt19937 rng(17);
  for (float scale : {1e-3f, 0.02f, 1.0f, 300.0f}) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> x(256 * 6);
    for (float& v : x) v = dist(rng);
    x[7] = 12 * scale;  // an outlier
    x[300] = -9 * scale;
    const std::vector<float> y = round_trip(type, x);
    double err2 = 0, ref2 = 0;
    for (size_t b = 0; b < x.size(); b += static_cast<size_t>(block)) {
      const double tol = bound(type, x.data() + b, block);
      for (size_t i = b; i < b + static_cast<size_t>(block); ++i) {
        ASSERT_LE(std::fabs(double(y[i]) - x[i]), tol) << "scale " << scale << " at " << i;
        err2 += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
        ref2 += double(x[i]) * x[i];
      }
    }
    // Signal to noise as the formats promise on Gaussian weights (measured: Q8_0 ~ 3e-5,
    // Q6_K ~ 1e-3, Q4_K ~ 8e-3 relative mean squared error).
    const double limit = type == GgmlType::kQ8_0 ? 1e-4 : type == GgmlType::kQ6_K ? 4e-3 : 2e-2;
    EXPECT_LT(err2 / ref2, limit) << "scale " << scale;
  }
}

TEST_P(QuantizeTest, ZeroAndConstantRows) {
  const GgmlType type = GetParam();
  std::vector<float> zero(512, 0.0f);
  for (float v : round_trip(type, zero)) ASSERT_EQ(v, 0.0f);
  std::vector<float> constant(512, 0.25f);
  for (float v : round_trip(type, constant)) ASSERT_NEAR(v, 0.25f, 0.25f / 60);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeTest,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(Quantize, RefusesOtherTypesAndPartialBlocks) {
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_FALSE(quantize_row(GgmlType::kQ5_0, x.data(), 256, q.data()).ok());
  const Status partial = quantize_row(GgmlType::kQ4_K, x.data(), 100, q.data());
  EXPECT_FALSE(partial.ok());
  EXPECT_NE(partial.message().find("whole number"), std::string::npos) << partial.to_string();
}

// Float rows: F32 as is, F16 / BF16 rounded to nearest even — dequantize_row gives back exactly the
// rounded values, and values already in the type come back unchanged.
TEST(Quantize, FloatTypesRoundTripThroughDequantize) {
  std::vector<float> x = {1.0f, -2.5f, 3.14159265f, 1e-8f, 65504.0f, -0.0f, 1.0f / 3.0f, 7e5f};
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    SCOPED_TRACE(std::string(ggml_type_name(t)));
    ASSERT_TRUE(can_quantize(t));
    std::vector<uint8_t> q(x.size() * 4);
    ASSERT_TRUE(quantize_row(t, x.data(), static_cast<int64_t>(x.size()), q.data()).ok());
    std::vector<float> back(x.size()), again(x.size());
    ASSERT_TRUE(dequantize_row(t, q.data(), static_cast<int64_t>(x.size()), back.data()).ok());
    for (size_t i = 0; i < x.size(); ++i) {
      const float expect = t == GgmlType::kF32   ? x[i]
                           : t == GgmlType::kF16 ? f16_to_f32(f32_to_f16(x[i]))
                                                 : bf16_to_f32(f32_to_bf16(x[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(expect)) << i;
    }
    ASSERT_TRUE(quantize_row(t, back.data(), static_cast<int64_t>(x.size()), q.data()).ok());
    ASSERT_TRUE(dequantize_row(t, q.data(), static_cast<int64_t>(x.size()), again.data()).ok());
    EXPECT_EQ(again, back);
  }
}

}  // namespace
}  // namespace rlt::quant
