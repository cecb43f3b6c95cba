// Logprobs are those of the raw model distribution (docs/sampling.md "Logprobs").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "sampler_test_util.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace rlt::sampling {
namespace {

using sampler_testing::kNegInf;
using sampler_testing::sampling;

std::vector<double> reference_log_softmax(const std::vector<float>& logits) {
  double max = -INFINITY;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - max);
  std::vector<double> out;
  for (float x : logits) out.push_back(x - max - std::log(sum));
  return out;
}

SampledToken sample_with(const std::vector<float>& logits, const SamplingParams& params,
                         uint64_t seed = 11, const TokenHistory& history = {}) {
  Sampler sampler;
  RngState rng = RngState::from_seed(seed);
  auto r = sampler.sample(logits, params, history, rng);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : SampledToken{};
}

std::vector<int32_t> ids_of(const TopLogprobs& top) {
  std::vector<int32_t> ids;
  for (const TokenLogprob& t : top) ids.push_back(t.token);
  return ids;
}

TEST(SamplerLogprobs, MatchDoublePrecisionLogSoftmax) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = static_cast<float>(8.0 * std::sin(i * 0.37) + 3.0 * std::cos(i * 1.91));
  }
  logits[17] = kNegInf;
  const std::vector<double> ref = reference_log_softmax(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return ref[a] > ref[b]; });

  SamplingParams p = sampling(1.0);
  p.logprobs = SamplingParams::kMaxLogprobs;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const SampledToken s = sample_with(logits, p, seed);
    EXPECT_NEAR(s.logprob, ref[s.token], 1e-5);
    ASSERT_EQ(s.top_logprobs.size(), 20u);
    for (size_t j = 0; j < s.top_logprobs.size(); ++j) {
      EXPECT_EQ(s.top_logprobs[j].token, order[j]) << "rank " << j;
      EXPECT_NEAR(s.top_logprobs[j].logprob, ref[order[j]], 1e-5) << "rank " << j;
    }
  }
}

TEST(SamplerLogprobs, TiesRankTheLowerIdFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  SamplingParams p = sampling(0.0);
  p.logprobs = 3;
  EXPECT_EQ(ids_of(sample_with(logits, p).top_logprobs), (std::vector<int32_t>{1, 2, 4}));
  p.logprobs = 4;
  EXPECT_EQ(ids_of(sample_with(logits, p).top_logprobs), (std::vector<int32_t>{1, 2, 4, 3}));
}

TEST(SamplerLogprobs, ZeroGivesTheSampledTokenOnlyAndAbsentGivesNothing) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  SamplingParams p = sampling(0.0);
  p.logprobs = 0;
  SampledToken s = sample_with(logits, p);
  EXPECT_EQ(s.token, 1);
  EXPECT_NEAR(s.logprob, std::log(0.75), 1e-6);
  EXPECT_TRUE(s.top_logprobs.empty());

  p.logprobs.reset();
  s = sample_with(logits, p);
  EXPECT_EQ(s.logprob, 0.0f);
  EXPECT_TRUE(s.top_logprobs.empty());
}

TEST(SamplerLogprobs, AreRawIgnoringPenaltiesTemperatureAndFilters) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f, 1.0f};
  const std::vector<double> ref = reference_log_softmax(logits);
  TokenHistory history(std::vector<int32_t>{1, 3});
  history.append(3);
  SamplingParams p = sampling(0.3);
  p.repetition_penalty = 1.7;
  p.frequency_penalty = 1.0;
  p.top_k = 2;
  p.logprobs = 6;
  SamplingParams plain = sampling(1.0);
  plain.logprobs = 6;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const SampledToken s = sample_with(logits, p, seed, history);
    EXPECT_NEAR(s.logprob, ref[s.token], 1e-6);
    const SampledToken raw = sample_with(logits, plain, seed);
    ASSERT_EQ(s.top_logprobs.size(), 6u);
    for (size_t j = 0; j < 6; ++j) EXPECT_EQ(s.top_logprobs[j], raw.top_logprobs[j]);
  }
}

TEST(SamplerLogprobs, AreCappedByTheVocabularyAndKeepMaskedTokensAtMinusInfinity) {
  const std::vector<float> logits = {kNegInf, 0.0f, 0.0f};
  SamplingParams p = sampling(1.0);
  p.logprobs = 20;
  const SampledToken s = sample_with(logits, p);
  ASSERT_EQ(s.top_logprobs.size(), 3u);
  EXPECT_EQ(ids_of(s.top_logprobs), (std::vector<int32_t>{1, 2, 0}));
  EXPECT_NEAR(s.top_logprobs[0].logprob, std::log(0.5), 1e-7);
  EXPECT_EQ(s.top_logprobs[2].logprob, kNegInf);
}

// Prompt scoring: any token of the row (not a sampled one), its rank in the top list's order.
TEST(ScoreToken, GivesTheTargetsRawLogprobRankAndTopList) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, kNegInf, 0.5f};
  const std::vector<double> want = reference_log_softmax(logits);
  const int32_t expected_rank[] = {4, 1, 3, 2, 6, 5};  // ties by lower id: 1 before 3
  for (int32_t t = 0; t < 6; ++t) {
    auto s = score_token(logits, t, 2);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->token.token, t);
    if (t == 4) {
      EXPECT_EQ(s->token.logprob, kNegInf);
    } else {
      EXPECT_NEAR(s->token.logprob, want[static_cast<size_t>(t)], 1e-6);
    }
    EXPECT_EQ(s->rank, expected_rank[t]) << "token " << t;
    EXPECT_EQ(ids_of(s->token.top_logprobs), (std::vector<int32_t>{1, 3}));
  }
  EXPECT_FALSE(score_token(logits, 6, 0).ok()) << "a target outside the row";
  EXPECT_FALSE(score_token(logits, -1, 0).ok());
  EXPECT_FALSE(score_token(std::vector<float>{1.0f, NAN}, 0, 0).ok()) << "a broken row is an error, not a number";
  EXPECT_FALSE(score_token(std::vector<float>{INFINITY, 0.0f}, 0, 0).ok());
  EXPECT_FALSE(score_token(std::vector<float>{kNegInf, kNegInf}, 0, 0).ok());
}

}  // namespace
}  // namespace rlt::sampling
