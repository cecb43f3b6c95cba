#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/dense_attention.h"
#include "kernels/cpu/parallel_rows.h"

namespace rlt::kernels {
namespace {

TEST(RmsNorm, MatchesFloat64Formula) {
  const int64_t n = 37;
  std::vector<float> x(2 * n), w(n), y(2 * n);
  for (int64_t i = 0; i < 2 * n; ++i) x[i] = std::sin(0.37f * i) * 3.0f;
  for (int64_t i = 0; i < n; ++i) w[i] = 1.0f + 0.01f * i;
  rms_norm(x.data(), w.data(), 2, n, 1e-6f, y.data());
  for (int r = 0; r < 2; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[r * n + i]) * x[r * n + i];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[r * n + i], w[i] * x[r * n + i] * inv, 1e-5);
  }
}

TEST(Rope, PairsDimensionWithItsHalfPartner) {
  // head_dim 4, theta 100: inv_freq = [1, 0.1]; position 2 rotates (x0, x2) by 2 rad and
  // (x1, x3) by 0.2 rad.
  Rope rope(4, 100.0);
  float v[4] = {1, 2, 3, 4};
  rope.apply(v, 1, 2);
  EXPECT_NEAR(v[0], 1 * std::cos(2.0) - 3 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(v[2], 3 * std::cos(2.0) + 1 * std::sin(2.0), 1e-6);
  EXPECT_NEAR(v[1], 2 * std::cos(0.2) - 4 * std::sin(0.2), 1e-6);
  EXPECT_NEAR(v[3], 4 * std::cos(0.2) + 2 * std::sin(0.2), 1e-6);
}

TEST(Rope, PositionZeroIsIdentity) {
  Rope rope(8, 1e6);
  float v[16];
  for (int i = 0; i < 16; ++i) v[i] = float(i) - 3.5f;
  float before[16];
  std::copy(v, v + 16, before);
  rope.apply(v, 2, 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(v[i], before[i]);
}

TEST(Argmax, TakesFirstIndexAmongTiesAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {1, 3, 3, 2};
  EXPECT_EQ(argmax(a.data(), 4), 1);
  std::vector<float> b = {nan, -1, 5, 5};
  EXPECT_EQ(argmax(b.data(), 4), 2);
}

// The fused residual add must give exactly what the two-step form (normalize, then add) gives,
// so fusing never changes results.
TEST(AddRmsNorm, EqualsNormThenAddBitForBit) {
  const int64_t rows = 3, n = 37;
  std::vector<float> h(rows * n), x(rows * n), w(n), normed(rows * n);
  for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.37f * i), x[i] = std::cos(1.3f * i) * 4;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + 0.01f * i;
  std::vector<float> fused = h;
  add_rms_norm(fused.data(), x.data(), w.data(), rows, n, 1e-6f);
  rms_norm(x.data(), w.data(), rows, n, 1e-6f, normed.data());
  add_in_place(h.data(), normed.data(), rows * n);
  for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(fused[i], h[i]) << i;
}

// A prompt's rows go to several threads (parallel_rows.h); each row must come out exactly as it
// does alone on one thread, whatever the thread count.
TEST(RowOps, ThreadCountDoesNotChangeResults) {
  const int64_t rows = 301, n = 576;  // above kParallelRowValues, an odd row count
  ASSERT_GE(rows * n, kParallelRowValues);
  std::vector<float> h(rows * n), x(rows * n), w(n);
  for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(0.37f * i), x[i] = std::cos(1.3f * i) * 4;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + 0.01f * i;
  // One row per call: never parallel, the reference.
  std::vector<float> norm_ref(h.size()), fused_ref = h, sum_ref = h;
  for (int64_t r = 0; r < rows; ++r) {
    rms_norm(x.data() + r * n, w.data(), 1, n, 1e-6f, norm_ref.data() + r * n);
    add_rms_norm(fused_ref.data() + r * n, x.data() + r * n, w.data(), 1, n, 1e-6f);
  }
  for (size_t i = 0; i < h.size(); ++i) sum_ref[i] += x[i];
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> norm(h.size()), fused = h, sum = h;
    rms_norm(x.data(), w.data(), rows, n, 1e-6f, norm.data());
    add_rms_norm(fused.data(), x.data(), w.data(), rows, n, 1e-6f);
    add_in_place(sum.data(), x.data(), rows * n);
    EXPECT_EQ(0, std::memcmp(norm.data(), norm_ref.data(), h.size() * sizeof(float))) << threads;
    EXPECT_EQ(0, std::memcmp(fused.data(), fused_ref.data(), h.size() * sizeof(float))) << threads;
    EXPECT_EQ(0, std::memcmp(sum.data(), sum_ref.data(), h.size() * sizeof(float))) << threads;
  }
  omp_set_num_threads(saved);
}

TEST(Rope, ExplicitInverseFrequenciesMatchTheDefaultConstructor) {
  const Rope a(8, 10000.0), b(Rope::default_inv_freq(8, 10000.0));
  std::vector<float> x(16), y;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * i - 0.5f;
  y = x;
  a.apply(x.data(), 2, 17);
  b.apply(y.data(), 2, 17);
  EXPECT_EQ(x, y);
  EXPECT_EQ(b.head_dim(), 8);
}

TEST(DenseAttention, MatchesFloat64SoftmaxWithGqa) {
  const DenseAttentionShape shape{4, 2, 3};
  const int64_t ctx = 5;
  std::vector<float> q(4 * 3), k(ctx * 2 * 3), v(ctx * 2 * 3), out(4 * 3), scores(ctx);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::cos(0.7f * i);
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.3f * i);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * i - 1;
  dense_attention_row(shape, q.data(), k.data(), v.data(), ctx, scores.data(), out.data());
  for (int h = 0; h < 4; ++h) {
    const int kvh = h / 2;
    double s[ctx], mx = -1e30, den = 0;
    for (int j = 0; j < ctx; ++j) {
      double dot = 0;
      for (int i = 0; i < 3; ++i) dot += double(q[h * 3 + i]) * k[(j * 2 + kvh) * 3 + i];
      s[j] = dot / std::sqrt(3.0);
      mx = std::max(mx, s[j]);
    }
    for (int j = 0; j < ctx; ++j) den += std::exp(s[j] - mx);
    for (int i = 0; i < 3; ++i) {
      double o = 0;
      for (int j = 0; j < ctx; ++j) o += std::exp(s[j] - mx) / den * v[(j * 2 + kvh) * 3 + i];
      EXPECT_NEAR(out[h * 3 + i], o, 1e-6) << "head " << h << " dim " << i;
    }
  }
}

}  // namespace
}  // namespace rlt::kernels
