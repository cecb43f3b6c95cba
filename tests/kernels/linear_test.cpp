#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/swiglu.h"
#include "simd_targets.h"

namespace rlt::kernels {
namespace {

struct StoredMatrix {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  WeightMatrix view;
  PackedMatrix packed;
};

StoredMatrix random_matrix(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  StoredMatrix m;
  m.f32.resize(static_cast<size_t>(rows * cols));
  for (float& v : m.f32) v = dist(rng);
  if (dtype == DType::kF32) {
    m.view = {dtype, rows, cols, m.f32.data()};
  } else {
    m.half.resize(m.f32.size());
    for (size_t i = 0; i < m.f32.size(); ++i) {
      m.half[i] = dtype == DType::kBF16 ? f32_to_bf16(m.f32[i]) : f32_to_f16(m.f32[i]);
      m.f32[i] = dtype == DType::kBF16 ? bf16_to_f32(m.half[i])
                                       : f16_to_f32(m.half[i]);  // exact stored value
    }
    m.view = {dtype, rows, cols, m.half.data()};
  }
  m.packed = PackedMatrix::pack(m.view);
  return m;
}

class LinearTest : public ::testing::TestWithParam<DType> {};

// Tolerance: an f32 dot product of length k with |x|,|w| ~ N(0,1) has rounding error about
// k·2^-24·Σ|x·w| in the worst case; relative to Σ|x·w| we allow 8·k·2^-24 (well above the
// typical √k growth, far below any indexing or conversion bug, which gives O(1) errors).
void check_odd_shapes(DType dtype) {
  std::mt19937 rng(1234);
  // Odd sizes cover partial panels (n % 32) and every row tile (1, 2, 8 rows) plus remainders.
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 7, 3},    {3, 5, 17},     {2, 33, 65},
                               {5, 64, 128}, {7, 129, 31}, {1, 300, 1000}, {4, 2048, 40},
                               {9, 6, 16},   {6, 3, 15},   {17, 70, 33}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    auto w = random_matrix(dtype, n, k, rng);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, w.packed, y.data());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          exact += double(x[r * k + i]) * double(w.f32[c * k + i]);
          magnitude += std::fabs(double(x[r * k + i]) * double(w.f32[c * k + i]));
        }
        const double tol = 8.0 * double(k) * 0x1p-24 * magnitude + 1e-30;
        ASSERT_NEAR(y[r * n + c], exact, tol)
            << "m=" << m << " n=" << n << " k=" << k << " at " << r << "," << c;
      }
    }
    // Batch invariance on the same shape: each row alone gives the same bits.
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, w.packed, alone.data());
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(alone[c], y[r * n + c]) << "m=" << m << " n=" << n << " k=" << k;
    }
  }
}

TEST_P(LinearTest, MatchesFloat64ReferenceOnOddShapes) {
  check_odd_shapes(GetParam());
}

// Every SIMD target compiled into this build and supported by this CPU (AVX-512, AVX2, SSE4, ...)
// is checked, not only the one dynamic dispatch picks here.
TEST_P(LinearTest, EveryCompiledTargetIsCorrect) {
  for_each_simd_target([this](int64_t target) {
    ASSERT_EQ(cpu_dispatch_target(), hwy::TargetName(target));
    check_odd_shapes(GetParam());
  });
}

// The batch-invariance contract: a row's outputs are bit-identical whatever else is in the batch.
TEST_P(LinearTest, RowResultsDoNotDependOnBatchComposition) {
  const DType dtype = GetParam();
  std::mt19937 rng(99);
  const int64_t n = 67, k = 131;
  auto w = random_matrix(dtype, n, k, rng);
  std::normal_distribution<float> dist;
  for (int64_t m : {2, 3, 5, 8}) {
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)),
        alone(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, w.packed, y.data());
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, w.packed, alone.data());
      for (int64_t c = 0; c < n; ++c)
        ASSERT_EQ(alone[c], y[r * n + c]) << "m=" << m << " row " << r;
    }
  }
}

// Expected value and the rounding bound of one dot product, as above.
struct Dot {
  double exact = 0, tol = 0;
};
Dot dot(const float* x, const std::vector<float>& w, int64_t row, int64_t k) {
  Dot d;
  double magnitude = 0;
  for (int64_t i = 0; i < k; ++i) {
    d.exact += double(x[i]) * double(w[row * k + i]);
    magnitude += std::fabs(double(x[i]) * double(w[row * k + i]));
  }
  d.tol = 8.0 * double(k) * 0x1p-24 * magnitude + 1e-30;
  return d;
}

TEST_P(LinearTest, ConcatenatedRowsEqualSeparateMatricesBitForBit) {
  const DType dtype = GetParam();
  std::mt19937 rng(7);
  const int64_t k = 45, m = 5;
  auto a = random_matrix(dtype, 6, k, rng), b = random_matrix(dtype, 3, k, rng),
       c = random_matrix(dtype, 5, k, rng);
  const PackedMatrix fused = PackedMatrix::pack_concat({a.view, b.view, c.view});
  ASSERT_EQ(fused.outputs(), 14);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * 14));
  for (float& v : x) v = dist(rng);
  linear(x.data(), m, fused, y.data());
  int64_t offset = 0;
  for (const StoredMatrix* part : {&a, &b, &c}) {
    std::vector<float> alone(static_cast<size_t>(m * part->view.rows));
    linear(x.data(), m, part->packed, alone.data());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < part->view.rows; ++j)
        ASSERT_EQ(y[r * 14 + offset + j], alone[r * part->view.rows + j]);
    offset += part->view.rows;
  }
}

TEST_P(LinearTest, SwigluEpilogueMatchesTheDefinition) {
  const DType dtype = GetParam();
  std::mt19937 rng(11);
  for (int64_t n : {1, 2, 5, 64}) {
    const int64_t k = 33, m = 6;
    auto gate = random_matrix(dtype, n, k, rng), up = random_matrix(dtype, n, k, rng);
    const PackedMatrix fused = PackedMatrix::pack_swiglu(gate.view, up.view);
    ASSERT_EQ(fused.outputs(), n);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)),
        alone(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, fused, y.data());
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, fused, alone.data());
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(alone[j], y[r * n + j]) << "batch invariance, n=" << n;
        const Dot g = dot(x.data() + r * k, gate.f32, j, k),
                  u = dot(x.data() + r * k, up.f32, j, k);
        const double silu = g.exact / (1 + std::exp(-g.exact));
        // silu'(g) <= 1.1, so the gate's rounding moves the product by at most 1.1·tol·|u|.
        const double tol = 1.1 * g.tol * std::fabs(u.exact) + std::fabs(silu) * u.tol +
                           1e-5 * std::fabs(silu * u.exact);
        ASSERT_NEAR(y[r * n + j], silu * u.exact, tol) << "n=" << n << " row " << r << " out " << j;
      }
    }
  }
}

TEST(PackedMatrix, MixedDtypesArePackedAsF32AndStillExact) {
  std::mt19937 rng(5);
  auto a = random_matrix(DType::kBF16, 4, 20, rng), b = random_matrix(DType::kF32, 4, 20, rng);
  const PackedMatrix mixed = PackedMatrix::pack_concat({a.view, b.view});
  EXPECT_EQ(mixed.dtype(), DType::kF32);
  std::vector<float> x(20, 0.25f), y(8);
  linear(x.data(), 1, mixed, y.data());
  for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(y[j], dot(x.data(), a.f32, j, 20).exact, 1e-5);
  for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(y[4 + j], dot(x.data(), b.f32, j, 20).exact, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Linear, ReportsADispatchTarget) {
  EXPECT_FALSE(cpu_dispatch_target().empty());
}

}  // namespace
}  // namespace rlt::kernels

namespace rlt::kernels {
namespace {

// The opt-in bf16 dot-product kernel: activations are rounded to bf16 (nearest even), products
// of two bf16 values are exact in f32 and accumulate in f32, so the reference is the float64 dot
// product of the rounded activations with the same f32 rounding bound as above.
TEST(LinearBf16Activations, MatchesFloat64OfRoundedActivationsAndIsBatchInvariant) {
  if (!bf16_dot_supported()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(77);
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 7, 3},     {3, 65, 17},
                               {7, 129, 31}, {13, 64, 128}, {6, 300, 1001}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    auto w = random_matrix(DType::kBF16, n, k, rng);
    const PackedMatrix packed = PackedMatrix::pack(w.view, {.bf16_activations = true});
    ASSERT_EQ(packed.layout(), PackedMatrix::Layout::kBf16Pairs);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(m * k)), rounded(x.size()),
        y(static_cast<size_t>(m * n));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = dist(rng), rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
    linear(x.data(), m, packed, y.data());
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, packed, alone.data());
      for (int64_t c = 0; c < n; ++c) {
        const Dot d = dot(rounded.data() + r * k, w.f32, c, k);
        ASSERT_NEAR(y[r * n + c], d.exact, d.tol) << "m=" << m << " n=" << n << " k=" << k;
        ASSERT_EQ(alone[c], y[r * n + c])
            << "batch invariance, m=" << m << " n=" << n << " k=" << k;
      }
    }
  }
}

TEST(LinearBf16Activations, FusedLayoutsMatchSeparateMatrices) {
  if (!bf16_dot_supported()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(78);
  const int64_t k = 45, m = 7, n = 40;
  auto gate = random_matrix(DType::kBF16, n, k, rng), up = random_matrix(DType::kBF16, n, k, rng);
  const PackOptions bf16{.bf16_activations = true};
  const PackedMatrix fused = PackedMatrix::pack_swiglu(gate.view, up.view, bf16);
  const PackedMatrix both = PackedMatrix::pack_concat({gate.view, up.view}, bf16);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(m * k)), act(static_cast<size_t>(m * n)),
      gu(static_cast<size_t>(m * 2 * n));
  for (float& v : x) v = dist(rng);
  linear(x.data(), m, fused, act.data());
  linear(x.data(), m, both, gu.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      const float g = gu[r * 2 * n + j], u = gu[r * 2 * n + n + j];
      ASSERT_EQ(act[r * n + j], silu_mul(g, u)) << r << "," << j;
    }
  }
}

TEST(LinearBf16Activations, OtherDtypesKeepTheF32ActivationKernel) {
  std::mt19937 rng(79);
  for (DType dtype : {DType::kF16, DType::kF32}) {
    auto w = random_matrix(dtype, 8, 8, rng);
    EXPECT_EQ(PackedMatrix::pack(w.view, {.bf16_activations = true}).layout(),
              PackedMatrix::Layout::kPanels);
  }
}

}  // namespace
}  // namespace rlt::kernels
