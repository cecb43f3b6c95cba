// The SwiGLU activation's own exponential against float64 (its accuracy, measured over its whole
// range), and the vectorized array form against the scalar specification bit for bit on every
// SIMD target compiled in and supported.
#include "kernels/cpu/swiglu.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "simd_targets.h"

namespace rlt::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// |got - exact| in units of the f32 spacing at the exact value (2^-149 below FLT_MIN).
double ulps(float got, double exact) {
  const double mag = std::fabs(exact);
  const int e = mag < std::numeric_limits<float>::min() ? -126 : std::ilogb(mag);
  return std::fabs(double(got) - exact) / std::ldexp(1.0, e - 23);
}

// Every 101st float from the smallest argument with a normal result to the largest with a finite
// one, both signs (~21 million points, each binade met ~83,000 times).
TEST(ExpF32, WithinOneUlpOverItsRange) {
  double worst = 0;
  float worst_x = 0;
  for (const float lo_end : {-87.33654022216796875f, 0.0f}) {
    const float hi_end = lo_end < 0 ? 0.0f : 88.72283172607421875f;
    // Walk magnitudes: bit patterns of |x| from 0 up to the end's.
    const uint32_t top = std::bit_cast<uint32_t>(lo_end < 0 ? -lo_end : hi_end);
    for (uint32_t bits = 0; bits <= top;
         bits += (bits + 101 > top && bits != top) ? top - bits : 101) {
      const float x = lo_end < 0 ? -std::bit_cast<float>(bits) : std::bit_cast<float>(bits);
      const double err = ulps(exp_f32(x), std::exp(double(x)));
      if (err > worst) worst = err, worst_x = x;
    }
  }
  RecordProperty("max_ulp", std::to_string(worst));
  EXPECT_LT(worst, 1.0) << "at x = " << worst_x;
}

TEST(ExpF32, EdgesOfItsRange) {
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  const float hi = 88.72283172607421875f, lo = -87.33654022216796875f;
  EXPECT_TRUE(std::isfinite(exp_f32(hi)));
  EXPECT_GT(exp_f32(hi), 3.4e38f);
  EXPECT_EQ(exp_f32(std::nextafter(hi, kInf)), kInf);
  EXPECT_EQ(exp_f32(kInf), kInf);
  EXPECT_GE(exp_f32(lo), std::numeric_limits<float>::min());
  EXPECT_EQ(exp_f32(std::nextafter(lo, -kInf)), 0.0f);
  EXPECT_EQ(exp_f32(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

// Gates over every magnitude the activation meets (and far beyond), ups of either sign.
std::vector<float> gates(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> log_mag(-30.0f, 8.0f);  // |g| from 1e-13 to ~3000
  std::vector<float> g(n);
  for (auto& v : g) v = (rng() & 1 ? 1.0f : -1.0f) * std::exp2(log_mag(rng));
  const float special[] = {0.0f,   -0.0f, kInf,   -kInf,  1e-40f,  -1e-40f, 87.0f,
                           -87.0f, 88.8f, -88.8f, 100.0f, -100.0f, 1.0f,    -1.0f};
  for (size_t i = 0; i < std::size(special) && i < n; ++i) g[i * 7 % n] = special[i];
  return g;
}

TEST(SiluMul, ArrayEqualsTheScalarFormBitForBitOnEveryTarget) {
  const std::vector<float> g = gates(1000, 1), u = gates(1000, 2);
  std::vector<float> expect(g.size());
  for (size_t i = 0; i < g.size(); ++i) expect[i] = silu_mul(g[i], u[i]);
  for_each_simd_target([&](int64_t) {
    for (const size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{15}, size_t{16}, size_t{17},
                           size_t{31}, size_t{32}, size_t{33}, size_t{1000}}) {
      SCOPED_TRACE(n);
      std::vector<float> out(n + 1, 42.0f);
      silu_mul(g.data(), u.data(), static_cast<int64_t>(n), out.data());
      ASSERT_EQ(std::memcmp(out.data(), expect.data(), n * sizeof(float)), 0);
      ASSERT_EQ(out[n], 42.0f);  // nothing written past n
    }
    std::vector<float> in_place = g;  // out aliasing g
    silu_mul(in_place.data(), u.data(), static_cast<int64_t>(g.size()), in_place.data());
    ASSERT_EQ(std::memcmp(in_place.data(), expect.data(), g.size() * sizeof(float)), 0);
  });
}

// exp_f32's ulp (≤ 2·2⁻²⁴ relative) and a half ulp for each of 1 + e, the division and the
// product: ≤ 3.5·2⁻²⁴ relative (3.04 measured), asserted as 4. Below that, where e^g underflows (g
// < -87.3), the exact value is under 1e-36·|u| and the result may be that far off (it is 0 or a
// tiny normal).
TEST(SiluMul, WithinFourUlpOfFloat64) {
  const std::vector<float> g = gates(200000, 3), u = gates(200000, 4);
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!std::isfinite(g[i]) || !std::isfinite(u[i])) continue;
    const double exact = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
    const double err = std::fabs(double(silu_mul(g[i], u[i])) - exact);
    ASSERT_LE(err, 4 * 0x1p-24 * std::fabs(exact) + 1e-36 * std::fabs(u[i])) << g[i] << " " << u[i];
    if (std::fabs(exact) >= std::numeric_limits<float>::min() && g[i] > -87.0f)
      worst = std::max(worst, err / std::fabs(exact) / 0x1p-24);
  }
  RecordProperty("max_relative_error_in_2^-24", std::to_string(worst));
}

TEST(SiluMul, SpecialValues) {
  EXPECT_EQ(silu_mul(0.0f, 5.0f), 0.0f);
  EXPECT_EQ(silu_mul(kInf, 2.0f), kInf);           // e^-inf = 0
  EXPECT_TRUE(std::isnan(silu_mul(-kInf, 2.0f)));  // -inf / inf, as the formula gives
  EXPECT_EQ(silu_mul(-100.0f, 1.0f), 0.0f);        // e^100 overflows: g / inf
  EXPECT_EQ(silu_mul(100.0f, 3.0f), 300.0f);       // e^-100 flushed: g · u exactly
}

}  // namespace
}  // namespace rlt::kernels
