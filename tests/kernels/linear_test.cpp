#include "kernels/cpu/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"

namespace rlt::kernels {
namespace {

struct StoredMatrix {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  WeightMatrix view;
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
  return m;
}

class LinearTest : public ::testing::TestWithParam<DType> {};

// Tolerance: an f32 dot product of length k with |x|,|w| ~ N(0,1) has rounding error about
// k·2^-24·Σ|x·w| in the worst case; relative to Σ|x·w| we allow 8·k·2^-24 (well above the
// typical √k growth, far below any indexing or conversion bug, which gives O(1) errors).
TEST_P(LinearTest, MatchesFloat64ReferenceOnOddShapes) {
  const DType dtype = GetParam();
  std::mt19937 rng(1234);
  const int64_t shapes[][3] = {{1, 1, 1}, {1, 7, 3}, {3, 5, 17}, {2, 33, 65}, {5, 64, 128},
                               {7, 129, 31}, {1, 300, 1000}, {4, 2048, 40}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    auto w = random_matrix(dtype, n, k, rng);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, w.view, y.data());
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
  }
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
    linear(x.data(), m, w.view, y.data());
    for (int64_t r = 0; r < m; ++r) {
      linear(x.data() + r * k, 1, w.view, alone.data());
      for (int64_t c = 0; c < n; ++c) ASSERT_EQ(alone[c], y[r * n + c]) << "m=" << m << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, LinearTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Linear, ReportsADispatchTarget) { EXPECT_FALSE(cpu_dispatch_target().empty()); }

}  // namespace
}  // namespace rlt::kernels
