// The quantized kernel against (a) a scalar implementation of its documented order (bit for bit
// where the SIMD target has fused multiply-add), (b) a float64 product with the matrix dequantized
// by quant::dequantize_row (itself bit-exact with the gguf package), within a stated bound.
#include "kernels/cpu/linear_quant.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/swiglu.h"
#include "quant/dequantize.h"
#include "quant_rows.h"
#include "simd_targets.h"

namespace rlt::kernels {
namespace {

using quant::GgmlType;

struct RowTerms {
  std::vector<float> q, scale, offset;
  int64_t group = 32;
};

RowTerms row_terms(const QuantRows& w, int64_t r) {
  const QuantPanelFormat f = *quant_panel_format(w.type);
  RowTerms t;
  t.group = f.group_cols;
  t.q.resize(static_cast<size_t>(w.cols));
  t.scale.resize(static_cast<size_t>(w.cols / f.group_cols));
  t.offset.resize(t.scale.size());
  quant_row_terms(f, w.row(r), w.cols, t.q.data(), t.scale.data(), t.offset.data());
  return t;
}

// The documented order, scalar, with fused multiply-adds.
float scalar_order(const float* x, const RowTerms& t, int64_t k, bool offset) {
  float y = 0.0f;
  for (int64_t g = 0; g < k / t.group; ++g) {
    float inner = 0.0f;
    for (int64_t c = g * t.group; c < (g + 1) * t.group; ++c) inner = std::fma(x[c], t.q[c], inner);
    y = std::fma(t.scale[g], inner, y);
    if (offset) {  // Σ x over the group (of 32), in column order
      float s = 0.0f;
      for (int64_t c = g * t.group; c < (g + 1) * t.group; ++c) s += x[c];
      y = std::fma(t.offset[g], s, y);
    }
  }
  return y;
}

// True when the dispatched target fuses multiply-adds (every x86 target from AVX2 up, NEON).
bool fused_target() {
  const std::string t = cpu_dispatch_target();
  return t.rfind("AVX", 0) == 0 || t.rfind("NEON", 0) == 0 || t.rfind("SVE", 0) == 0;
}

class LinearQuantTest : public ::testing::TestWithParam<GgmlType> {};

void check_odd_shapes(GgmlType type) {
  const int64_t bc = quant_panel_format(type)->block_cols;
  std::mt19937 rng(static_cast<unsigned>(type) * 7919u);
  // Partial panels (n % 64), every row tile and remainder (tiles of 8 or 2 rows by target, and
  // the expanded path from 20 rows: tiles of 6 or 3 rows and every rest of them, a 64-row block
  // and a short one after it), one and several blocks.
  const int64_t shapes[][3] = {{1, 1, bc},   {1, 7, 2 * bc},  {3, 65, bc},      {2, 64, 3 * bc},
                               {5, 129, bc}, {7, 33, 2 * bc}, {9, 130, bc},     {1, 300, 4 * bc},
                               {8, 64, bc},  {13, 70, bc},    {21, 65, 2 * bc}, {6, 3, bc},
                               {20, 33, bc}, {22, 9, 2 * bc}, {23, 65, bc},     {25, 7, bc},
                               {70, 64, bc}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const QuantRows w = random_rows(type, n, k, rng);
    const PackedMatrix packed = PackedMatrix::pack(w.view());
    ASSERT_EQ(packed.layout(), PackedMatrix::Layout::kQuant);
    std::normal_distribution<float> dist;
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, packed, y.data());
    std::vector<float> deq(static_cast<size_t>(k));
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_TRUE(quant::dequantize_row(type, w.row(c), k, deq.data()).ok());
      const RowTerms t = row_terms(w, c);
      for (int64_t r = 0; r < m; ++r) {
        const float* xr = x.data() + r * k;
        const float got = y[static_cast<size_t>(r * n + c)];
        const float order = scalar_order(xr, t, k, quant_panel_format(type)->has_offset);
        if (fused_target()) {
          ASSERT_EQ(got, order) << "m=" << m << " n=" << n << " k=" << k << " at " << r << "," << c;
        }
        // Against float64 on the dequantized weights. Each group's inner sum is a chain of 32
        // (16) roundings, the groups a chain of k/32; both scale with the factored magnitudes
        // |scale·q| + |offset| (which exceed |w| where a min cancels), and the reference's own
        // weights are rounded once or twice (d·q + m): (group + k/group + 8)·2⁻²⁴ of Σ|x|·that.
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          exact += double(xr[i]) * double(deq[static_cast<size_t>(i)]);
          const int64_t g = i / t.group;
          magnitude += std::fabs(double(xr[i])) *
                       (std::fabs(double(t.scale[g]) * t.q[i]) + std::fabs(double(t.offset[g])) +
                        std::fabs(double(deq[static_cast<size_t>(i)])));
        }
        const double tol = double(t.group + k / t.group + 8) * 0x1p-24 * magnitude + 1e-30;
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

// Every SIMD target compiled in and supported here (AVX-512, AVX2, SSE4, ...): each one's decode
// and expanded prefill paths.
TEST_P(LinearQuantTest, OddShapesAgainstOrderAndDequantizedOracle) {
  for_each_simd_target([this](int64_t) { check_odd_shapes(GetParam()); });
}

// Above the one-thread threshold: panels shared out whole (16 panels on 2 threads) and by halves
// (few panels that do not divide among the threads: a panel on a thread boundary is computed half
// by each), for a decode row and a small batch; the last panel partial too. And a prefill batch
// of three row blocks (64, 64, 22 rows), whose (panel, row block) runs end inside a panel on
// some thread counts.
TEST_P(LinearQuantTest, ThreadCountDoesNotChangeResults) {
  const GgmlType type = GetParam();
  std::mt19937 rng(99);
  const int saved = omp_get_max_threads();
  struct Shape {
    int64_t k, m;
  };
  for (const int64_t n : {1000, 576, 583}) {
    for (const Shape shape : {Shape{2048, 1}, Shape{2048, 3}, Shape{512, 150}}) {
      const int64_t k = shape.k, m = shape.m;
      const QuantRows w = random_rows(type, n, k, rng);
      const PackedMatrix packed = PackedMatrix::pack(w.view());
      std::normal_distribution<float> dist;
      std::vector<float> x(static_cast<size_t>(m * k)), one(static_cast<size_t>(m * n));
      for (float& v : x) v = dist(rng);
      omp_set_num_threads(1);
      linear(x.data(), m, packed, one.data());
      for (const int threads : {2, 3, 4}) {
        std::vector<float> many(one.size(), std::nanf(""));
        omp_set_num_threads(threads);
        linear(x.data(), m, packed, many.data());
        ASSERT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
            << "n=" << n << " m=" << m << " threads=" << threads;
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST_P(LinearQuantTest, SwiGLUEqualsSeparateProducts) {
  const GgmlType type = GetParam();
  const int64_t k = quant_panel_format(type)->block_cols * 2;
  std::mt19937 rng(5);
  for (int64_t n : {1, 31, 32, 33, 100}) {
    const QuantRows gate = random_rows(type, n, k, rng), up = random_rows(type, n, k, rng);
    const PackedMatrix fused = PackedMatrix::pack_swiglu(gate.view(), up.view());
    ASSERT_EQ(fused.layout(), PackedMatrix::Layout::kQuant);
    const PackedMatrix pg = PackedMatrix::pack(gate.view()), pu = PackedMatrix::pack(up.view());
    std::normal_distribution<float> dist;
    const int64_t m = 3;
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)), g(y.size()),
        u(y.size());
    for (float& v : x) v = dist(rng);
    linear(x.data(), m, fused, y.data());
    linear(x.data(), m, pg, g.data());
    linear(x.data(), m, pu, u.data());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], silu_mul(g[i], u[i])) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, LinearQuantTest,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_K,
                                           GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) {
                           return std::string(quant::ggml_type_name(info.param));
                         });

// q/k/v of a Q4_K_M file: Q4_K, Q4_K and Q6_K parts meeting at panel boundaries keep their types
// panel by panel, and equal the parts computed separately.
TEST(LinearQuantConcat, MixedTypesAtPanelBoundaries) {
  std::mt19937 rng(11);
  const int64_t k = 512, m = 2;
  const QuantRows q = random_rows(GgmlType::kQ4_K, 128, k, rng),
                  kk = random_rows(GgmlType::kQ4_K, 64, k, rng),
                  v = random_rows(GgmlType::kQ6_K, 70, k, rng);
  const PackedMatrix qkv = PackedMatrix::pack_concat({q.view(), kk.view(), v.view()});
  ASSERT_EQ(qkv.layout(), PackedMatrix::Layout::kQuant);
  ASSERT_EQ(qkv.quant_panels().size(), 2u + 1u + 2u);
  EXPECT_EQ(qkv.quant_panels()[3].type, GgmlType::kQ6_K);
  std::normal_distribution<float> dist;
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * 262));
  for (float& val : x) val = dist(rng);
  linear(x.data(), m, qkv, y.data());
  int64_t first = 0;
  for (const QuantRows* part : {&q, &kk, &v}) {
    const PackedMatrix alone = PackedMatrix::pack(part->view());
    std::vector<float> ya(static_cast<size_t>(m * part->rows));
    linear(x.data(), m, alone, ya.data());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < part->rows; ++c)
        ASSERT_EQ(ya[static_cast<size_t>(r * part->rows + c)],
                  y[static_cast<size_t>(r * 262 + first + c)]);
    first += part->rows;
  }
}

// Types that meet inside a panel, or a type the kernel does not compute on, are dequantized to
// f32 panels: the same function as the dequantized matrix.
TEST(LinearQuantConcat, UnalignedMixOrUnsupportedTypeFallsBackToF32) {
  std::mt19937 rng(12);
  const int64_t k = 256;
  const QuantRows a = random_rows(GgmlType::kQ4_K, 33, k, rng),
                  b = random_rows(GgmlType::kQ6_K, 40, k, rng);
  const PackedMatrix mixed = PackedMatrix::pack_concat({a.view(), b.view()});
  EXPECT_EQ(mixed.layout(), PackedMatrix::Layout::kPanels);
  EXPECT_EQ(mixed.dtype(), DType::kF32);
  const QuantRows c = random_rows(GgmlType::kQ2_K, 20, k, rng);
  const PackedMatrix q50 = PackedMatrix::pack(c.view());
  EXPECT_EQ(q50.layout(), PackedMatrix::Layout::kPanels);
  std::vector<float> x(static_cast<size_t>(k), 0.5f), y(20), deq(static_cast<size_t>(k));
  linear(x.data(), 1, q50, y.data());
  for (int64_t r = 0; r < 20; ++r) {
    ASSERT_TRUE(quant::dequantize_row(GgmlType::kQ2_K, c.row(r), k, deq.data()).ok());
    float expect = 0.0f;
    for (int64_t i = 0; i < k; ++i) expect = std::fma(0.5f, deq[static_cast<size_t>(i)], expect);
    if (fused_target()) {
      ASSERT_EQ(y[static_cast<size_t>(r)], expect);
    } else {
      ASSERT_NEAR(y[static_cast<size_t>(r)], expect, 1e-4);
    }
  }
}

// No file holds a K-quant row of partial blocks (the loaders check), but a matrix claiming one
// must not become quantized panels: the kernel would read past the last block.
TEST(LinearQuantConcat, RowsOfPartialBlocksAreNotQuantizedPanels) {
  std::vector<uint8_t> bytes(static_cast<size_t>(64 * 576 / 256 * 144));
  const WeightMatrix w{DType::kF32, 64, 576, bytes.data(), GgmlType::kQ4_K};
  EXPECT_NE(PackedMatrix::pack(w).layout(), PackedMatrix::Layout::kQuant);
}

}  // namespace
}  // namespace rlt::kernels
