// Device sampling against the host sampler (sampling/sampler.h) on the same rows and uniforms:
// temperature, top-k (with ties at the threshold), top-p, min-p and their combinations, masked
// (-inf) entries, greedy rows in the same batch, penalties over random histories, logprobs, and
// broken rows reported as the host reports them. The tokens must be equal: the device repeats the
// host's f32 arithmetic and differs only in how double sums associate (~1e-16 of the total), which
// the fixed uniforms here never straddle.
#include "cuda/sampling.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "device_buffer.h"
#include "gpu_test_util.h"
#include "sampling/device_rows.h"
#include "sampling/sampler.h"

namespace rlt::cuda {
namespace {

using testing::Dev;

struct Row {
  SamplingParams params;
  sampling::RngState rng;
  sampling::TokenHistory history;
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

// What one sample_rows call returned.
struct DeviceSamples {
  std::vector<int32_t> result;
  std::vector<float> bad;
  std::vector<DeviceLogprobs> logprobs;
};

DeviceSamples sample_on_device(const std::vector<float>& logits, int64_t rows, int64_t vocab,
                               const sampling::DeviceSampleRows& spec) {
  Dev<float> dl(logits), bad(static_cast<size_t>(rows));
  Dev<DeviceSampleParams> dp(spec.params);
  Dev<int32_t> ids(spec.history_ids), counts(spec.history_counts);
  Dev<int32_t> result(static_cast<size_t>(rows * 3));
  Dev<DeviceLogprobs> logprobs(static_cast<size_t>(rows));
  Dev<std::byte> scratch(
      sampling_scratch_bytes(rows, vocab, spec.any_top_p, spec.any_penalties, spec.any_logprobs));
  SampleBatch b;
  b.logits = dl.p();
  b.rows = rows;
  b.vocab = vocab;
  b.params = dp.p();
  b.any_top_p = spec.any_top_p;
  b.any_penalties = spec.any_penalties;
  b.any_logprobs = spec.any_logprobs;
  b.history_ids = ids.p();
  b.history_counts = counts.p();
  b.scratch = scratch.p();
  b.result = result.p();
  b.bad_value = bad.p();
  b.logprobs = logprobs.p();
  EXPECT_TRUE(sample_rows(b, nullptr).ok());
  DeviceSamples out;
  out.result = result.read(static_cast<size_t>(rows * 3));
  out.bad = bad.read(static_cast<size_t>(rows));
  if (spec.any_logprobs) out.logprobs = logprobs.read(static_cast<size_t>(rows));
  return out;
}

// A logprob from the device against the host's: both are f32 casts of x - log_normalizer, whose
// double sums associate differently (~1e-16 relative), so they agree to the last bit but for a
// rounding boundary: one f32 ulp of slack.
void expect_logprob(float device, float host, const std::string& what) {
  EXPECT_LE(std::fabs(device - host), std::max(1.0f, std::fabs(host)) * 1.2e-7f)
      << what << ": device " << device << ", host " << host;
}

// Rows under every combination of the rules; with `extras`, a third of them with penalties over a
// random history (prompt and generated ids, repeats included) and a quarter with logprobs.
void check_vocab(int64_t vocab, uint32_t seed, bool extras) {
  const double temperatures[] = {0.0, 0.5, 1.0, 1.7};
  const int64_t top_ks[] = {-1, 1, 7, 40, vocab + 5};
  const double top_ps[] = {1.0, 0.9, 0.5, 0.05};
  const double min_ps[] = {0.0, 0.02, 0.3};
  // 1e-30 and 1e30 on rows scaled to ~1e9 overflow f32: the clamp to the finite range decides.
  const double repetitions[] = {1.3, 0.8, 1.0, 1e-30, 1e30};
  const double frequencies[] = {0.5, -0.4, 0.0};
  const double presences[] = {0.3, 0.0, -1.5};
  const int logprob_counts[] = {0, 1, 5, 20};
  const int64_t rows = 60;
  std::mt19937 g(seed);
  std::vector<float> logits;
  std::vector<Row> spec(static_cast<size_t>(rows));
  sampling::DeviceSampleRows device;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> x = make_row(vocab, static_cast<int>(r), g);
    Row& row = spec[static_cast<size_t>(r)];
    SamplingParams& p = row.params;
    p.temperature = temperatures[r % 4];
    p.top_k = top_ks[(r / 4) % 5];
    p.top_p = top_ps[(r / 3) % 4];
    p.min_p = min_ps[(r / 5) % 3];
    if (extras && r % 3 == 0) {
      p.repetition_penalty = repetitions[(r / 3) % 5];
      if (p.repetition_penalty < 1e-20 || p.repetition_penalty > 1e20)
        for (float& v : x) v *= 1e9f;
      p.frequency_penalty = frequencies[(r / 9) % 3];
      p.presence_penalty = presences[(r / 6) % 3];
      std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(vocab - 1)),
          few(0, static_cast<int32_t>(std::min<int64_t>(vocab, 12) - 1));
      std::vector<int32_t> prompt(30);
      for (int32_t& t : prompt) t = any(g);
      row.history = sampling::TokenHistory(prompt);
      for (int i = 0; i < 40; ++i) row.history.append(i % 2 ? few(g) : any(g));
    }
    // Every fifth row: all temperatures (greedy included) and masked rows get logprobs too.
    if (extras && r % 5 == 1) p.logprobs = logprob_counts[(r / 5) % 4];
    logits.insert(logits.end(), x.begin(), x.end());
    row.rng = sampling::RngState::from_seed(seed * 1000 + static_cast<uint64_t>(r));
    device.add(p, &row.history, row.rng.uniform(), vocab);
  }
  ASSERT_EQ(device.any_penalties, extras);
  ASSERT_EQ(device.any_logprobs, extras);
  const DeviceSamples got = sample_on_device(logits, rows, vocab, device);
  sampling::Sampler sampler;
  for (int64_t r = 0; r < rows; ++r) {
    Row& row = spec[static_cast<size_t>(r)];
    const std::span<const float> x(logits.data() + r * vocab, static_cast<size_t>(vocab));
    auto want = sampler.sample(x, row.params, row.history, row.rng);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const std::string what = fmt::format(
        "vocab {} row {}: temperature {} top_k {} top_p {} min_p {} penalties {}/{}/{} logprobs {}",
        vocab, r, row.params.temperature, row.params.top_k, row.params.top_p, row.params.min_p,
        row.params.repetition_penalty, row.params.frequency_penalty, row.params.presence_penalty,
        row.params.logprobs.value_or(-1));
    EXPECT_EQ(got.result[3 * r + 1], -1) << what;
    EXPECT_EQ(got.result[3 * r + 2], 1) << what;
    EXPECT_EQ(got.result[3 * r], want->token) << what;
    if (!row.params.logprobs) continue;
    const DeviceLogprobs& lp = got.logprobs[static_cast<size_t>(r)];
    expect_logprob(lp.logprob, want->logprob, what + " sampled");
    ASSERT_EQ(lp.count, want->top_logprobs.count) << what;
    for (int j = 0; j < lp.count; ++j) {
      EXPECT_EQ(lp.ids[j], want->top_logprobs[static_cast<size_t>(j)].token)
          << what << " top " << j;
      expect_logprob(lp.values[j], want->top_logprobs[static_cast<size_t>(j)].logprob,
                     what + " top " + std::to_string(j));
    }
  }
}

TEST(DeviceSampling, EqualsTheHostSampler) {
  RLT_REQUIRE_CUDA_DEVICE();
  check_vocab(1000, 1, false);
  check_vocab(49152, 2, false);  // Ouro's vocabulary: several elements per thread, real sort sizes
  check_vocab(131, 3, false);    // fewer entries than threads
}

TEST(DeviceSampling, PenaltiesAndLogprobsEqualTheHostSampler) {
  RLT_REQUIRE_CUDA_DEVICE();
  check_vocab(1000, 4, true);
  check_vocab(49152, 5, true);
  check_vocab(131, 6, true);
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
  sampling::DeviceSampleRows greedy;
  SamplingParams argmax;
  argmax.temperature = 0.0;
  for (int i = 0; i < 6; ++i) greedy.add(argmax, nullptr, 0.0, vocab);
  const DeviceSamples got = sample_on_device(logits, 6, vocab, greedy);
  const std::vector<int32_t>& r = got.result;
  const std::vector<float>& b = got.bad;
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
  // Top-p, penalties and logprobs on: each stage must leave the broken values for the check.
  sampling::TokenHistory history(std::vector<int32_t>{40, 200, 7, 9});
  history.append(40);
  history.append(7);
  sampling::DeviceSampleRows rows;
  for (int i = 0; i < 3; ++i) {
    SamplingParams p;
    p.temperature = 1.0;
    p.top_p = 0.5;
    p.repetition_penalty = 1.5;
    p.frequency_penalty = 0.5;
    p.logprobs = 3;
    rows.add(p, &history, 0.25, vocab);
  }
  const DeviceSamples got = sample_on_device(logits, 3, vocab, rows);
  const std::vector<int32_t>& r = got.result;
  const std::vector<float>& b = got.bad;
  EXPECT_EQ(r[1], 40);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(r[4], 7);
  EXPECT_EQ(b[1], inf);
  EXPECT_EQ(r[7], -1);
  EXPECT_EQ(r[8], 0) << "no finite value";
}

}  // namespace
}  // namespace rlt::cuda
