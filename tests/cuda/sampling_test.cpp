// Device sampling against the host sampler (engine/sampler.h) on the same rows and uniforms:
// temperature, top-k (with ties at the threshold), top-p, min-p and their combinations, masked
// (-inf) entries, greedy rows in the same batch, and broken rows reported as the host reports
// them. The tokens must be equal: the device repeats the host's f32 arithmetic and differs only in
// how double sums associate (~1e-16 of the total), which the fixed uniforms here never straddle.
#include "cuda/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "device_buffer.h"
#include "engine/sampler.h"
#include "gpu_test_util.h"

namespace rlt::cuda {
namespace {

using testing::Dev;

struct Row {
  SamplingParams params;
  engine::RngState rng;
};

// Logits of one row: N(0, 3), some rows quantized to steps of 0.5 (many ties), some with masked
// entries.
std::vector<float> make_row(int64_t vocab, int kind, std::mt19937& g) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(vocab));
  for (float& v : x) v = d(g);
  if (kind % 3 == 1)
    for (float& v : x) v = std::round(v * 2.0f) / 2.0f;
  if (kind % 4 == 2)
    for (size_t i = 0; i < x.size(); i += 2) x[i] = -std::numeric_limits<float>::infinity();
  return x;
}

void check_vocab(int64_t vocab, uint32_t seed) {
  const double temperatures[] = {0.0, 0.5, 1.0, 1.7};
  const int64_t top_ks[] = {-1, 1, 7, 40, vocab + 5};
  const double top_ps[] = {1.0, 0.9, 0.5, 0.05};
  const double min_ps[] = {0.0, 0.02, 0.3};
  const int64_t rows = 60;
  std::mt19937 g(seed);
  std::vector<float> logits;
  std::vector<Row> spec(static_cast<size_t>(rows));
  std::vector<DeviceSampleParams> params(static_cast<size_t>(rows));
  bool any_top_p = false;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> x = make_row(vocab, static_cast<int>(r), g);
    logits.insert(logits.end(), x.begin(), x.end());
    SamplingParams& p = spec[static_cast<size_t>(r)].params;
    p.temperature = temperatures[r % 4];
    p.top_k = top_ks[(r / 4) % 5];
    p.top_p = top_ps[(r / 3) % 4];
    p.min_p = min_ps[(r / 5) % 3];
    spec[static_cast<size_t>(r)].rng =
        engine::RngState::from_seed(seed * 1000 + static_cast<uint64_t>(r));
    DeviceSampleParams& d = params[static_cast<size_t>(r)];
    if (!p.greedy()) {
      d.temperature = engine::temperature_f32(p.temperature);
      d.top_k = p.top_k > 0 && p.top_k < vocab ? static_cast<int32_t>(p.top_k) : 0;
      d.top_p = p.top_p;
      d.log_min_p = p.min_p > 0 ? std::log(p.min_p) : -std::numeric_limits<double>::infinity();
      d.uniform = spec[static_cast<size_t>(r)].rng.uniform();
      any_top_p |= p.top_p < 1.0;
    }
  }
  Dev<float> dl(logits), bad(static_cast<size_t>(rows));
  Dev<DeviceSampleParams> dp(params);
  Dev<int32_t> result(static_cast<size_t>(rows * 3));
  Dev<std::byte> scratch(sampling_scratch_bytes(rows, vocab, any_top_p));
  ASSERT_TRUE(
      sample_rows(dl.p(), rows, vocab, dp.p(), any_top_p, scratch.p(), result.p(), bad.p(), nullptr)
          .ok());
  const auto got = result.read(static_cast<size_t>(rows * 3));
  engine::Sampler sampler;
  for (int64_t r = 0; r < rows; ++r) {
    Row& row = spec[static_cast<size_t>(r)];
    const std::span<const float> x(logits.data() + r * vocab, static_cast<size_t>(vocab));
    auto want = sampler.sample(x, row.params, engine::TokenHistory(), row.rng);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(got[3 * r + 1], -1);
    EXPECT_EQ(got[3 * r + 2], 1);
    EXPECT_EQ(got[3 * r], want->token)
        << "vocab " << vocab << " row " << r << ": temperature " << row.params.temperature
        << " top_k " << row.params.top_k << " top_p " << row.params.top_p << " min_p "
        << row.params.min_p;
  }
}

TEST(DeviceSampling, EqualsTheHostSampler) {
  RLT_REQUIRE_CUDA_DEVICE();
  check_vocab(1000, 1);
  check_vocab(49152, 2);  // Ouro's vocabulary: several elements per thread, real sort sizes
  check_vocab(131, 3);    // fewer entries than threads
}

// Greedy rows (temperature 0): the first index among ties, NaN / +inf and rows without a finite
// value reported as the host sampler reports them.
TEST(DeviceSampling, GreedyRowsFollowTheHostRules) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t vocab = 1000;
  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits(6 * vocab);
  std::mt19937 g(12);
  std::normal_distribution<float> d;
  for (float& x : logits) x = d(g);
  float* row = logits.data();
  row[10] = row[700] = 50.0f;  // row 0: tie, the first wins
  for (int64_t i = 0; i < vocab; ++i)
    row[vocab + i] = i == 999 ? 1.0f : -inf;  // row 1: masked but one
  row[2 * vocab + 500] = nan;                 // row 2: NaN reported
  row[2 * vocab + 800] = inf;
  row[3 * vocab + 3] = inf;                                       // row 3: +inf reported
  for (int64_t i = 0; i < vocab; ++i) row[4 * vocab + i] = -inf;  // row 4: nothing finite
  Dev<float> dl(logits), bad(6);
  Dev<int32_t> result(18);
  Dev<DeviceSampleParams> params(std::vector<DeviceSampleParams>(6));  // all greedy
  Dev<std::byte> scratch(sampling_scratch_bytes(6, vocab, false));
  ASSERT_TRUE(
      sample_rows(dl.p(), 6, vocab, params.p(), false, scratch.p(), result.p(), bad.p(), nullptr)
          .ok());
  const auto r = result.read(18);
  const auto b = bad.read(6);
  EXPECT_EQ(r[0], 10);
  EXPECT_EQ(r[1], -1);
  EXPECT_EQ(r[3], 999);
  EXPECT_EQ(r[7], 500);
  EXPECT_TRUE(std::isnan(b[2]));
  EXPECT_EQ(r[10], 3);
  EXPECT_EQ(b[3], inf);
  EXPECT_EQ(r[13], -1);
  EXPECT_EQ(r[14], 0) << "no finite value";
  EXPECT_EQ(r[15], static_cast<int32_t>(std::max_element(row + 5 * vocab, row + 6 * vocab) -
                                        (row + 5 * vocab)))
      << "a plain random row";
  EXPECT_EQ(r[16], -1);
  EXPECT_EQ(r[17], 1);
}

TEST(DeviceSampling, BrokenRowsAreReportedAsTheHostReportsThem) {
  RLT_REQUIRE_CUDA_DEVICE();
  const int64_t vocab = 300;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(static_cast<size_t>(3 * vocab), 0.5f);
  logits[40] = std::numeric_limits<float>::quiet_NaN();
  logits[200] = inf;
  logits[vocab + 7] = inf;
  for (int64_t i = 0; i < vocab; ++i) logits[2 * vocab + i] = -inf;
  std::vector<DeviceSampleParams> params(3);
  for (auto& p : params) {
    p.temperature = 1.0f;
    p.top_p = 0.5;
    p.log_min_p = -std::numeric_limits<double>::infinity();
    p.uniform = 0.25;
  }
  Dev<float> dl(logits), bad(3);
  Dev<DeviceSampleParams> dp(params);
  Dev<int32_t> result(9);
  Dev<std::byte> scratch(sampling_scratch_bytes(3, vocab, true));
  ASSERT_TRUE(
      sample_rows(dl.p(), 3, vocab, dp.p(), true, scratch.p(), result.p(), bad.p(), nullptr).ok());
  const auto r = result.read(9);
  const auto b = bad.read(3);
  EXPECT_EQ(r[1], 40);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(r[4], 7);
  EXPECT_EQ(b[1], inf);
  EXPECT_EQ(r[7], -1);
  EXPECT_EQ(r[8], 0) << "no finite value";
}

}  // namespace
}  // namespace rlt::cuda
