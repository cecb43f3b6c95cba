#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <hwy/targets.h>

#include "common/half.h"

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
      m.f32[i] = dtype == DType::kBF16 ? bf16_to_f32(m.half[i]) : f16_to_f32(m.half[i]);  // exact stored value
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
  const int64_t shapes[][3] = {{1, 1, 1},   {1, 7, 3},     {3, 5, 17},     {2, 33, 65},   {5, 64, 128},
                               {7, 129, 31}, {1, 300, 1000}, {4, 2048, 40}, {9, 6, 16},    {6, 3, 15},
                               {17, 70, 33}};
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
        ASSERT_NEAR(y[r * n + c], exact, tol) << "m=" << m << " n=" << n << " k=" << k << " at " << r << "," << c;
      }
    }
    // Batch invariance on the same shape: each row alone gives the same bits.
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, w.packed, alone.data());
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(alone[c], y[r * n + c]) << "m=" << m << " n=" << n << " k=" << k;
    }
  }
}

TEST_P(LinearTest, MatchesFloat64ReferenceOnOddShapes) { check_odd_shapes(GetParam()); }

// Every SIMD target compiled into this build and supported by this CPU (AVX-512, AVX2, SSE4, ...)
// is checked, not only the one dynamic dispatch picks here.
TEST_P(LinearTest, EveryCompiledTargetIsCorrect) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_EQ(cpu_dispatch_target(), hwy::TargetName(target));
    check_odd_shapes(GetParam());
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The batch-invariance contract: a row's outputs are bit-identical whatever else is in the batch.
TEST_P(LinearTest, RowResultsDoNotDependOnBatchComposition) {
  const DType dtype = GetParam();
  std::mt19937 rng(99);
  const int64_t n = 67, k = 131;
  auto w = random_matrix(dtype, n, k, rng);
  std::normal_distribution<float> dist;
  for (int64_t m : {2, 3, 5, 8}) {
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)), alone(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, w.packed, y.data());
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, w.packed, alone.data());
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(alone[c], y[r * n + c]) << "m=" << m << " row " << r;
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
  auto a = random_matrix(dtype, 6, k, rng), b = random_matrix(dtype, 3, k, rng), c = random_matrix(dtype, 5, k, rng);
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
      for (int64_t j = 0; j < part->view.rows; ++j) ASSERT_EQ(y[r * 14 + offset + j], alone[r * part->view.rows + j]);
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
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)), alone(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, fused, y.data());
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, fused, alone.data());
      for (int64_t j = 0; j < n; ++j) {
        ASSERT_EQ(alone[j], y[r * n + j]) << "batch invariance, n=" << n;
        const Dot g = dot(x.data() + r * k, gate.f32, j, k), u = dot(x.data() + r * k, up.f32, j, k);
        const double silu = g.exact / (1 + std::exp(-g.exact));
        // silu'(g) <= 1.1, so the gate's rounding moves the product by at most 1.1·tol·|u|.
        const double tol = 1.1 * g.tol * std::fabs(u.exact) + std::fabs(silu) * u.tol + 1e-5 * std::fabs(silu * u.exact);
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

TEST(Linear, ReportsADispatchTarget) { EXPECT_FALSE(cpu_dispatch_target().empty()); }

}  // namespace
}  // namespace rlt::kernels
