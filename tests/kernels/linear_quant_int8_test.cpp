// The int8-activation kernel against (a) a scalar implementation of its documented order on the
// same 8-bit activations (bit for bit: the integer sums are exact and the float steps the same
// fused multiply-adds), (b) a float64 product with the matrix dequantized by
// quant::dequantize_row and the activations unrounded, within the bound the activations'
// rounding implies.
// The kernel is also built for AVX3_DL (AVX-512 VNNI), which Highway 1.0 lists only on request.
#define HWY_WANT_AVX3_DL
#include "kernels/cpu/linear_quant_int8.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/swiglu.h"
#include "quant/dequantize.h"
#include "quant_rows.h"

namespace rlt::kernels {
namespace {

using quant::GgmlType;

constexpr PackOptions kInt8{.int8_activations = true};

PackedMatrix pack_int8(const QuantRows& w) {
  return PackedMatrix::pack(w.view(), kInt8);
}

// The documented order for row r of x (already quantized in `a`) and output row `row` of w.
float scalar_order(const QuantizedActivations& a, int64_t r, const QuantRows& w, int64_t row) {
  const QuantPanelFormat f = *quant_panel_format(w.type);
  const int64_t k = w.cols, gc = f.group_cols;
  std::vector<float> q(static_cast<size_t>(k)), scale(static_cast<size_t>(k / gc)),
      offset(scale.size());
  quant_row_terms(f, w.row(row), k, q.data(), scale.data(), offset.data());
  float y = 0.0f;
  for (int64_t g = 0; g < k / gc; ++g) {
    int32_t isum = 0;
    for (int64_t c = g * gc; c < (g + 1) * gc; ++c)
      isum += static_cast<int32_t>(q[c]) * a.q[static_cast<size_t>(r * k + c)];
    const size_t g32 = static_cast<size_t>(r * (k / 32) + g * gc / 32);
    y = std::fma(scale[g] * a.d[g32], static_cast<float>(isum), y);
    if (f.has_offset) y = std::fma(offset[g], a.dsum[g32], y);
  }
  return y;
}

std::vector<float> normal(int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(rng);
  return v;
}

class LinearQuantInt8Test : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!linear_quant_int8_supported())
      GTEST_SKIP() << "this CPU has no int8 kernel (needs AVX2 or AArch64)";
  }
};

TEST_P(LinearQuantInt8Test, OddShapesAgainstOrderAndDequantizedOracle) {
  const GgmlType type = GetParam();
  const int64_t bc = quant_panel_format(type)->block_cols;
  std::mt19937 rng(static_cast<unsigned>(type) * 104729u);
  // Partial panels (n % 64), the small batches' tiles (2-31 rows: 2, 3, 4, 2 + 3, 4 + 2, 4 + 3,
  // 4 + 2 + 3, 4 + 4 + 2 + 3; 9 blocks: a stretch of 8 blocks and 1 more for 32-column types,
  // 9 one-block stretches for 256-column ones), prefill's tiles of 4 and a rest of 2, 1 or 3
  // rows, one and several blocks.
  const int64_t shapes[][3] = {
      {1, 1, bc},      {1, 7, 2 * bc},   {3, 65, bc},      {4, 64, 3 * bc},
      {5, 129, bc},    {7, 33, 2 * bc},  {9, 130, bc},     {1, 300, 4 * bc},
      {2, 64, 2 * bc}, {6, 65, bc},      {11, 64, bc},     {66, 70, bc},
      {5, 70, 9 * bc}, {13, 66, 9 * bc}, {31, 64, 2 * bc}, {85, 65, bc},
      {35, 64, 2 * bc}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const QuantRows w = random_rows(type, n, k, rng);
    const PackedMatrix packed = pack_int8(w);
    ASSERT_EQ(packed.layout(), PackedMatrix::Layout::kQuantInt8);
    std::vector<float> x = normal(m * k, rng), y(static_cast<size_t>(m * n));
    // A row with one large activation per group, and a zero row: the rounding's extremes.
    if (m > 2) {
      for (int64_t c = 0; c < k; c += 32) x[static_cast<size_t>(k + c)] = 40.0f;
      std::fill(x.begin() + 2 * k, x.begin() + 3 * k, 0.0f);
    }
    linear(x.data(), m, packed, y.data());
    QuantizedActivations a;
    quantize_activations(x.data(), m, k, a);
    const QuantPanelFormat f = *quant_panel_format(type);
    std::vector<float> deq(static_cast<size_t>(k)), q(static_cast<size_t>(k)),
        scale(static_cast<size_t>(k / f.group_cols)), offset(scale.size());
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_TRUE(quant::dequantize_row(type, w.row(c), k, deq.data()).ok());
      quant_row_terms(f, w.row(c), k, q.data(), scale.data(), offset.data());
      for (int64_t r = 0; r < m; ++r) {
        const float got = y[static_cast<size_t>(r * n + c)];
        ASSERT_EQ(got, scalar_order(a, r, w, c))
            << "m=" << m << " n=" << n << " k=" << k << " at " << r << "," << c;
        // Against float64 with unrounded activations: each activation moves by at most half its
        // group's step d (the product by at most |w|·d/2), plus the f32 steps' roundings
        // (k/16 + 8 of them, each within 2⁻²⁴ of the factored magnitudes |scale·q| + |offset|,
        // which exceed |w| where a min cancels).
        const float* xr = x.data() + r * k;
        double exact = 0, rounding = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double wi = deq[static_cast<size_t>(i)];
          exact += double(xr[i]) * wi;
          rounding += std::fabs(wi) * a.d[static_cast<size_t>(r * (k / 32) + i / 32)] * 0.5;
          const int64_t g = i / f.group_cols;
          magnitude +=
              (std::fabs(double(xr[i])) + a.d[static_cast<size_t>(r * (k / 32) + i / 32)]) *
              (std::fabs(double(scale[g]) * q[i]) + std::fabs(double(offset[g])) + std::fabs(wi));
        }
        const double tol = rounding * 1.0001 + double(k / 16 + 8) * 0x1p-24 * magnitude + 1e-30;
        ASSERT_NEAR(got, exact, tol)
            << "m=" << m << " n=" << n << " k=" << k << " at " << r << "," << c;
      }
    }
    // Batch invariance: each row alone gives the same bits as in the batch.
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, packed, alone.data());
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(alone[c], y[static_cast<size_t>(r * n + c)]);
    }
  }
}

TEST_P(LinearQuantInt8Test, ThreadCountDoesNotChangeResults) {
  const GgmlType type = GetParam();
  std::mt19937 rng(99);
  const int64_t n = 1000, k = 2048;  // above the one-thread threshold
  const QuantRows w = random_rows(type, n, k, rng);
  const PackedMatrix packed = pack_int8(w);
  // 150 rows: the activations are rounded by several threads too (blocks of 8, the last partial).
  for (int64_t m : {1, 9, 150}) {
    const std::vector<float> x = normal(m * k, rng);
    std::vector<float> one(static_cast<size_t>(m * n)), two(one.size());
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    linear(x.data(), m, packed, one.data());
    omp_set_num_threads(2);
    linear(x.data(), m, packed, two.data());
    omp_set_num_threads(saved);
    ASSERT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << m;
  }
}

TEST_P(LinearQuantInt8Test, SwiGLUEqualsSeparateProducts) {
  const GgmlType type = GetParam();
  const int64_t k = quant_panel_format(type)->block_cols * 2;
  std::mt19937 rng(5);
  for (int64_t n : {1, 31, 32, 33, 100}) {
    const QuantRows gate = random_rows(type, n, k, rng), up = random_rows(type, n, k, rng);
    const PackedMatrix fused = PackedMatrix::pack_swiglu(gate.view(), up.view(), kInt8);
    ASSERT_EQ(fused.layout(), PackedMatrix::Layout::kQuantInt8);
    const PackedMatrix pg = pack_int8(gate), pu = pack_int8(up);
    const int64_t m = 5;
    const std::vector<float> x = normal(m * k, rng);
    std::vector<float> y(static_cast<size_t>(m * n)), g(y.size()), u(y.size());
    linear(x.data(), m, fused, y.data());
    linear(x.data(), m, pg, g.data());
    linear(x.data(), m, pu, u.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], silu_mul(g[i], u[i])) << n;
  }
}

// The targets with an int8 kernel (AVX2, AVX-512, AVX-512 VNNI; NEON on AArch64:
// int8_lanes-inl.h) compute the same integers and run the same float steps lane for
// lane, so every one the CPU has gives the same bits, decode and prefill tiles alike.
TEST_P(LinearQuantInt8Test, EveryTargetGivesTheSameBits) {
  const GgmlType type = GetParam();
  const int64_t k = quant_panel_format(type)->block_cols * 3, n = 130;
  std::mt19937 rng(21);
  const QuantRows w = random_rows(type, n, k, rng);
  const PackedMatrix packed = pack_int8(w);
  for (int64_t m : {1, 6}) {
    const std::vector<float> x = normal(m * k, rng);
    std::vector<std::vector<float>> got;
    std::vector<int64_t> targets;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      if (linear_quant_int8_kernel().empty()) continue;  // a target without the kernel
      got.emplace_back(static_cast<size_t>(m * n));
      targets.push_back(target);
      linear(x.data(), m, packed, got.back().data());
    }
    hwy::SetSupportedTargetsForTest(0);
    std::string names;
    for (int64_t t : targets) names += std::string(hwy::TargetName(t)) + " ";
    RecordProperty("targets", names);
    for (size_t t = 1; t < got.size(); ++t)
      ASSERT_EQ(0, std::memcmp(got[t].data(), got[0].data(), got[0].size() * sizeof(float)))
          << hwy::TargetName(targets[t]) << " vs " << hwy::TargetName(targets[0]) << ", m=" << m;
  }
}

// The variant this CPU runs, by name; scripts/cross_check_arm64.sh runs the suite on emulated
// AArch64 cores without and with the dot-product extension and names, in RLT_EXPECT_INT8_KERNEL,
// the variant each must take, so that the tests above check both bit for bit.
TEST(LinearQuantInt8Variant, IsTheOneThisCpuShouldRun) {
  if (!linear_quant_int8_supported()) {
    GTEST_SKIP() << "this CPU has no int8 kernel (needs AVX2 or AArch64)";
  }
  const std::string name = linear_quant_int8_kernel();
  RecordProperty("kernel", name);
  if (const char* expected = std::getenv("RLT_EXPECT_INT8_KERNEL")) {
    EXPECT_EQ(name, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LinearQuantInt8Test,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_K,
                                           GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) {
                           return std::string(quant::ggml_type_name(info.param));
                         });

// Q4_K_M's q/k/v: Q4_K and Q6_K panels side by side in the int8 layout too (and Q5_K_M's Q5_K);
// types that meet inside a panel fall back to f32 panels as with f32 activations.
TEST(LinearQuantInt8Concat, MixedTypesAtPanelBoundaries) {
  if (!linear_quant_int8_supported())
    GTEST_SKIP() << "this CPU has no int8 kernel (needs AVX2 or AArch64)";
  std::mt19937 rng(11);
  const int64_t k = 512, m = 6;
  const QuantRows q = random_rows(GgmlType::kQ4_K, 128, k, rng),
                  v = random_rows(GgmlType::kQ6_K, 70, k, rng);
  const PackedMatrix qv = PackedMatrix::pack_concat({q.view(), v.view()}, kInt8);
  ASSERT_EQ(qv.layout(), PackedMatrix::Layout::kQuantInt8);
  const std::vector<float> x = normal(m * k, rng);
  std::vector<float> y(static_cast<size_t>(m * 198));
  linear(x.data(), m, qv, y.data());
  int64_t first = 0;
  for (const QuantRows* part : {&q, &v}) {
    std::vector<float> ya(static_cast<size_t>(m * part->rows));
    linear(x.data(), m, pack_int8(*part), ya.data());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < part->rows; ++c)
        ASSERT_EQ(ya[static_cast<size_t>(r * part->rows + c)],
                  y[static_cast<size_t>(r * 198 + first + c)]);
    first += part->rows;
  }
  const QuantRows five = random_rows(GgmlType::kQ5_K, 64, k, rng);
  EXPECT_EQ(PackedMatrix::pack_concat({q.view(), five.view()}, kInt8).layout(),
            PackedMatrix::Layout::kQuantInt8);
  EXPECT_EQ(PackedMatrix::pack_concat({v.view(), five.view()}, kInt8).layout(),
            PackedMatrix::Layout::kPanels)
      << "70 rows: the types would meet inside a panel";
}

// Rounding: q in [-127, 127], |x − d·q| ≤ d/2 (plus the f32 division's ulp), the sums exact; a
// zero group rounds to zeros with d = 0.
TEST(QuantizeActivations, RoundsEachGroupToItsStep) {
  std::mt19937 rng(3);
  const int64_t m = 3, k = 256;
  std::vector<float> x = normal(m * k, rng);
  for (int64_t c = 64; c < 96; ++c) x[static_cast<size_t>(c)] = 0.0f;
  x[7] = -1e6f;
  QuantizedActivations a;
  quantize_activations(x.data(), m, k, a);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < k / 32; ++g) {
      const float d = a.d[static_cast<size_t>(r * (k / 32) + g)];
      int32_t sum = 0;
      for (int64_t c = g * 32; c < g * 32 + 32; ++c) {
        const int q = a.q[static_cast<size_t>(r * k + c)];
        ASSERT_LE(std::abs(q), 127);
        ASSERT_LE(std::fabs(x[static_cast<size_t>(r * k + c)] - d * q),
                  d * 0.5f * 1.0001f + 1e-30f);
        sum += q;
      }
      ASSERT_EQ(sum, a.sum16[static_cast<size_t>(r * (k / 16) + 2 * g)] +
                         a.sum16[static_cast<size_t>(r * (k / 16) + 2 * g + 1)]);
      ASSERT_EQ(a.dsum[static_cast<size_t>(r * (k / 32) + g)], d * static_cast<float>(sum));
    }
  }
  EXPECT_EQ(a.d[2], 0.0f);
  EXPECT_EQ(a.q[0 * k + 7], -127);
}

// linear_quant_int8.h's definition, written out: the oracle of every target's rounding.
QuantizedActivations quantize_by_definition(const std::vector<float>& x, int64_t m, int64_t k) {
  QuantizedActivations a;
  a.rows = m;
  a.cols = k;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < k / 32; ++g) {
      const float* xg = x.data() + r * k + g * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xg[i]));
      const float d = amax / 127.0f, inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sums[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const long q = std::clamp(std::lrint(xg[i] * inv), -127L, 127L);  // ties to even
        a.q.push_back(static_cast<int8_t>(q));
        sums[i / 16] += static_cast<int32_t>(q);
      }
      a.d.push_back(d);
      a.sum16.push_back(sums[0]);
      a.sum16.push_back(sums[1]);
      a.dsum.push_back(d * static_cast<float>(sums[0] + sums[1]));
    }
  }
  return a;
}

// Every target's rounding (AVX2's and NEON's vector code, the scalar one elsewhere) is the
// definition's, value for value, ties and clamping included.
TEST(QuantizeActivations, EveryTargetRoundsByTheDefinition) {
  std::mt19937 rng(4);
  const int64_t m = 2, k = 128;
  std::vector<float> x = normal(m * k, rng);
  for (int64_t c = 0; c < 32; ++c) x[static_cast<size_t>(c)] = 0.5f * static_cast<float>(c - 16);
  // A group whose step is exactly 1 (max 127): halves are ties, which go to the even neighbour.
  for (int64_t c = 0; c < 31; ++c)
    x[static_cast<size_t>(32 + c)] = static_cast<float>(c - 15) + 0.5f;
  x[63] = -127.0f;
  const QuantizedActivations want = quantize_by_definition(x, m, k);
  ASSERT_EQ(want.q[32], -14) << "-14.5 rounds to even";
  ASSERT_EQ(want.q[33], -14) << "-13.5 rounds to even";
  std::vector<QuantizedActivations> got;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    got.emplace_back();
    quantize_activations(x.data(), m, k, got.back());
  }
  hwy::SetSupportedTargetsForTest(0);
  for (size_t t = 0; t < got.size(); ++t) {
    EXPECT_EQ(got[t].q, want.q) << t;
    EXPECT_EQ(got[t].d, want.d) << t;
    EXPECT_EQ(got[t].sum16, want.sum16) << t;
    EXPECT_EQ(got[t].dsum, want.dsum) << t;
  }
}

}  // namespace
}  // namespace rlt::kernels
