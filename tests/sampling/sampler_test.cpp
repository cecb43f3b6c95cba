// The processing order of docs/sampling.md, one step at a time, with worked numbers.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampler_test_util.h"

namespace rlt::sampling {
namespace {

using sampler_testing::expect_probs_near;
using sampler_testing::kNegInf;
using sampler_testing::processed;
using sampler_testing::sampling;
using sampler_testing::softmax;
using sampler_testing::support;

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

int32_t sample_once(const std::vector<float>& logits, const SamplingParams& params, uint64_t seed,
                    const TokenHistory& history = {}) {
  Sampler sampler;
  RngState rng = RngState::from_seed(seed);
  auto r = sampler.sample(logits, params, history, rng);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->token : -1;
}

// --- greedy ---

TEST(SamplerGreedy, PicksTheFirstIndexAmongTies) {
  const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 5.0f, 5.0f};
  for (uint64_t seed : {0, 1, 99}) EXPECT_EQ(sample_once(logits, sampling(0.0), seed), 1);
  expect_probs_near(processed(logits, sampling(0.0)), {0, 1, 0, 0, 0});
}

TEST(SamplerGreedy, IgnoresTopKTopPMinPAndStillAdvancesTheStreamOnce) {
  SamplingParams p = sampling(0.0);
  p.top_k = 1;
  p.top_p = 0.01;
  p.min_p = 0.9;
  const std::vector<float> logits = {0.0f, 2.0f, kNegInf, 1.0f};
  Sampler sampler;
  RngState rng = RngState::from_seed(7);
  auto r = sampler.sample(logits, p, {}, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->token, 1);
  EXPECT_EQ(rng.counter, 1u) << "the token index, not the number of draws, drives the stream";
}

// --- temperature ---

TEST(SamplerTemperature, DividesTheLogits) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  expect_probs_near(processed(logits, sampling(0.5)), softmax({2.0, 4.0, 6.0}));
  expect_probs_near(processed(logits, sampling(2.0)), softmax({0.5, 1.0, 1.5}));
  expect_probs_near(processed(logits, sampling(1.0)), softmax({1.0, 2.0, 3.0}));
}

TEST(SamplerTemperature, TinyTemperatureBehavesLikeArgmaxWithoutOverflow) {
  const std::vector<float> logits = {99.0f, 100.0f, -100.0f};
  for (double t : {1e-30, 1e-45}) {
    expect_probs_near(processed(logits, sampling(t)), {0, 1, 0});
    EXPECT_EQ(sample_once(logits, sampling(t), 3), 1);
  }
}

// --- top-k ---

TEST(SamplerTopK, TopKOneIsGreedyWhenTheMaximumIsUnique) {
  SamplingParams p = sampling(1.7);
  p.top_k = 1;
  std::vector<float> logits(50);
  for (uint64_t seed = 0; seed < 200; ++seed) {
    for (size_t i = 0; i < logits.size(); ++i) {
      logits[i] = static_cast<float>(std::sin(seed * 31.0 + i * 7.0) * 4.0);
    }
    EXPECT_EQ(sample_once(logits, p, seed), sample_once(logits, sampling(0.0), seed));
  }
}

TEST(SamplerTopK, KeepsEveryTieAtTheThreshold) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  SamplingParams p = sampling(1.0);
  p.top_k = 2;  // the 2nd largest is 3: all three 3s survive
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{1, 2, 4}));
  expect_probs_near(processed(logits, p), {0, 1.0 / 3, 1.0 / 3, 0, 1.0 / 3, 0});
  p.top_k = 4;  // the 4th largest is 2
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{1, 2, 3, 4}));
  for (int64_t off_or_all : {-1, 0, 6, 1000}) {
    p.top_k = off_or_all;
    EXPECT_EQ(support(processed(logits, p)).size(), 6u) << "top_k " << off_or_all;
  }
}

// --- top-p ---

TEST(SamplerTopP, StrictGreaterThanWithTheFirstAlwaysKept) {
  // Four equal logits: probabilities exactly 0.25, cumulative sums exactly 0.25, 0.5, 0.75, 1.
  const std::vector<float> logits(4, 0.0f);
  SamplingParams p = sampling(1.0);
  p.top_p = 0.5;  // cumsum 0.5 is not > 0.5: the third token (lower ids first among ties) stays
  expect_probs_near(processed(logits, p), {1.0 / 3, 1.0 / 3, 1.0 / 3, 0});
  p.top_p = 0.3;  // the token that crosses top_p is kept (mask shifted right by one)
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0, 1}));
  p.top_p = 0.2;  // the first token alone already exceeds top_p, and is kept
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0}));
  p.top_p = 1.0;
  EXPECT_EQ(support(processed(logits, p)).size(), 4u);
}

TEST(SamplerTopP, WorkedExampleSortsDescendingWithTiesByLowerId) {
  // Probabilities by id: 0.125, 0.5, 0.125, 0.25. Sorted: id 1 (0.5), 3 (0.25), 0, 2 (0.125).
  const std::vector<float> logits = log_of({0.125, 0.5, 0.125, 0.25});
  SamplingParams p = sampling(1.0);
  p.top_p = 0.7;  // cumsum 0.5 | 0.75 > 0.7: keep ids 1, 3
  expect_probs_near(processed(logits, p), {0, 2.0 / 3, 0, 1.0 / 3});
  p.top_p = 0.8;  // 0.75 <= 0.8 keeps id 0; 0.875 > 0.8 drops id 2
  expect_probs_near(processed(logits, p), {1.0 / 7, 4.0 / 7, 0, 2.0 / 7});
  p.top_p = 0.4;
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{1}));
  p.top_p = 0.9;
  EXPECT_EQ(support(processed(logits, p)).size(), 4u);
}

TEST(SamplerTopP, AppliesToTheTopKRenormalizedDistribution) {
  const std::vector<float> logits = log_of({0.4, 0.3, 0.2, 0.1});
  SamplingParams p = sampling(1.0);
  p.top_p = 0.5;  // alone: cumsum 0.4 <= 0.5 keeps the second token
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0, 1}));
  p.top_k = 2;  // after top-k: 4/7 = 0.571 > 0.5 already at the first
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0}));
}

// --- min-p ---

TEST(SamplerMinP, RemovesTokensBelowMinPTimesTheLargestProbability) {
  const std::vector<float> logits = {0.0f, -1.0f, -2.0f, -3.0f};  // ratios 1, .368, .135, .050
  SamplingParams p = sampling(1.0);
  p.min_p = 0.1;
  expect_probs_near(processed(logits, p), [] {
    auto q = softmax({0.0, -1.0, -2.0});
    q.push_back(0.0);
    return q;
  }());
  p.min_p = 0.2;
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0, 1}));
  p.min_p = 1.0;  // only the maximum (and its ties) survive
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0}));
  EXPECT_EQ(support(processed({0.0f, 0.0f, -1.0f}, p)), (std::vector<int32_t>{0, 1}));
}

TEST(SamplerMinP, UsesTheTemperedDistribution) {
  const std::vector<float> logits = {0.0f, -1.0f, -2.0f, -3.0f};
  SamplingParams p = sampling(2.0);  // ratios 1, .607, .368, .223
  p.min_p = 0.3;
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0, 1, 2}));
  // The ratio to the maximum does not change when top-k removed others first.
  p.top_k = 2;
  p.min_p = 0.5;
  EXPECT_EQ(support(processed(logits, p)), (std::vector<int32_t>{0, 1}));
}

// --- penalties (worked numbers; the processed logits are recovered through softmax) ---

struct PenaltyCase {
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 0.0f, 3.0f};
  TokenHistory history;
  PenaltyCase() : history(std::vector<int32_t>{0, 1}) {
    for (int32_t t : {2, 2, 3}) history.append(t);  // generated: 2 twice, 3 once
  }
};

TEST(SamplerPenalties, RepetitionDividesPositiveAndMultipliesNegativeLogits) {
  PenaltyCase c;
  SamplingParams p = sampling(1.0);
  p.repetition_penalty = 2.0;
  // Every distinct prompt + generated id: 2 -> 1, -1 -> -2, 0.5 -> 0.25, 0 -> 0; id 4 untouched.
  expect_probs_near(processed(c.logits, p, c.history), softmax({1.0, -2.0, 0.25, 0.0, 3.0}));
}

TEST(SamplerPenalties, FrequencyAndPresenceUseGeneratedCountsOnly) {
  PenaltyCase c;
  SamplingParams p = sampling(1.0);
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  // id 2: 0.5 - 0.5*2 - 0.25 = -0.75; id 3: 0 - 0.5*1 - 0.25 = -0.75; prompt-only ids untouched.
  expect_probs_near(processed(c.logits, p, c.history), softmax({2.0, -1.0, -0.75, -0.75, 3.0}));
  p.frequency_penalty = 0.0;
  p.presence_penalty = -1.0;  // negative values encourage repetition
  expect_probs_near(processed(c.logits, p, c.history), softmax({2.0, -1.0, 1.5, 1.0, 3.0}));
}

TEST(SamplerPenalties, RepetitionComesBeforeFrequencyAndPresence) {
  PenaltyCase c;
  SamplingParams p = sampling(1.0);
  p.repetition_penalty = 2.0;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  // id 2: 0.5/2 - 1 - 0.25 = -1; id 3: 0*2 - 0.5 - 0.25 = -0.75.
  expect_probs_near(processed(c.logits, p, c.history), softmax({1.0, -2.0, -1.0, -0.75, 3.0}));
}

TEST(SamplerPenalties, ApplyBeforeTheGreedyCheck) {
  const std::vector<float> logits = {3.0f, 2.5f};
  TokenHistory history;
  history.append(0);
  SamplingParams p = sampling(0.0);
  EXPECT_EQ(sample_once(logits, p, 0, history), 0);
  p.repetition_penalty = 1.5;  // 3 / 1.5 = 2 < 2.5
  EXPECT_EQ(sample_once(logits, p, 0, history), 1);
}

TEST(SamplerLogitBias, AddsToTheLogitsAfterThePenalties) {
  PenaltyCase c;
  SamplingParams p = sampling(1.0);
  p.repetition_penalty = 2.0;
  p.logit_bias = {{4, -1.5f}, {1, 0.5f}};
  // Penalties first (as RepetitionDividesPositiveAndMultipliesNegativeLogits), then the biases:
  // id 1: -2 + 0.5; id 4: 3 - 1.5.
  expect_probs_near(processed(c.logits, p, c.history), softmax({1.0, -1.5, 0.25, 0.0, 1.5}));
}

TEST(SamplerLogitBias, BansAndForcesTokensAndKeepsMasks) {
  const std::vector<float> logits = {3.0f, 2.5f, kNegInf, 1.0f};
  SamplingParams p = sampling(0.0);
  p.logit_bias = {{0, -100.0f}};
  EXPECT_EQ(sample_once(logits, p, 0), 1);  // the argmax banned
  p.logit_bias = {{3, 100.0f}};
  EXPECT_EQ(sample_once(logits, p, 0), 3);
  p = sampling(1.0);
  p.logit_bias = {{2, 100.0f}, {3, 100.0f}};  // a masked token stays masked
  for (uint64_t seed = 0; seed < 50; ++seed) EXPECT_EQ(sample_once(logits, p, seed), 3);
}

// --- the draw ---

TEST(SamplerDraw, InverseCdfInAscendingIdOrderWithOneUniform) {
  // Equal weights: the token is floor(u * survivors), u = the stream's uniform for this token.
  const std::vector<float> logits(4, 0.0f);
  SamplingParams top_p = sampling(1.0);
  top_p.top_p = 0.5;  // survivors 0, 1, 2
  for (uint64_t seed = 0; seed < 64; ++seed) {
    const double u = RngState::from_seed(seed).uniform();
    EXPECT_EQ(sample_once(logits, sampling(1.0), seed), static_cast<int32_t>(u * 4));
    EXPECT_EQ(sample_once(logits, top_p, seed), static_cast<int32_t>(u * 3));
  }
}

TEST(SamplerDraw, NeverPicksMaskedTokens) {
  const std::vector<float> logits = {kNegInf, 0.0f, kNegInf, 0.0f, kNegInf};
  Sampler sampler;
  RngState rng = RngState::from_seed(5);
  for (int i = 0; i < 2000; ++i) {
    auto r = sampler.sample(logits, sampling(1.0), {}, rng);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->token == 1 || r->token == 3) << r->token;
  }
  EXPECT_EQ(rng.counter, 2000u);
}

// --- failures ---

TEST(SamplerErrors, RejectsBrokenRowsAndLeavesTheStreamUntouched) {
  Sampler sampler;
  RngState rng = RngState::from_seed(1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<float> logits;
    const char* message;
  };
  const Case cases[] = {
      {{}, "cannot sample from an empty logits row"},
      {{0.0f, nan}, "logits[1] is nan"},
      {{inf, 0.0f}, "logits[0] is inf"},
      {{kNegInf, kNegInf}, "the logits row has no finite value"},
  };
  for (const Case& c : cases) {
    for (double t : {0.0, 1.0}) {
      auto r = sampler.sample(c.logits, sampling(t), {}, rng);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(r.status().message(), c.message);
    }
  }
  TokenHistory history(std::vector<int32_t>{0, 9});
  SamplingParams p = sampling(1.0);
  p.repetition_penalty = 1.2;
  auto r = sampler.sample(std::vector<float>{0.0f, 1.0f}, p, history, rng);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "token id 9 in the request's history is outside the vocabulary [0, 2)");
  EXPECT_EQ(rng.counter, 0u);
}

TEST(SamplerPenalties, ExtremeValidPenaltiesSaturateInsteadOfBreakingTheRow) {
  // Beyond the f32 range the factor saturates and results clamp to +-FLT_MAX: no NaN, no +inf,
  // no row masked entirely.
  TokenHistory history(std::vector<int32_t>{0, 1, 2});
  const std::vector<float> logits = {-1.0f, -2.0f, 0.25f, 0.5f};
  for (double penalty : {1e39, 1e-300}) {
    SamplingParams p = sampling(1.0);
    p.repetition_penalty = penalty;
    const std::vector<double> probs = processed(logits, p, history);
    for (double q : probs) EXPECT_TRUE(std::isfinite(q)) << "penalty " << penalty;
    p.temperature = 0.0;
    EXPECT_EQ(sample_once(logits, p, 0, history), penalty > 1 ? 3 : 2) << "penalty " << penalty;
  }
}

}  // namespace
}  // namespace rlt::sampling

namespace rlt::sampling {
namespace {

// --- the structured-output mask ---

TEST(SamplerMask, OnlyAllowedTokensAreEverSampled) {
  const std::vector<float> logits = {5.0f, 0.0f, 1.0f, 4.0f};  // token 0 is by far the likeliest
  const std::vector<uint64_t> allowed = {(1u << 1) | (1u << 2)};
  SamplingParams greedy;
  greedy.temperature = 0.0;
  Sampler sampler;
  RngState rng = RngState::from_seed(1);
  auto g = sampler.sample(logits, greedy, {}, rng, allowed);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->token, 2);
  SamplingParams hot;
  hot.temperature = 2.0;
  hot.logprobs = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    RngState r = RngState::from_seed(seed);
    auto t = sampler.sample(logits, hot, {}, r, allowed);
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->token == 1 || t->token == 2) << t->token;
    // Logprobs stay those of the raw distribution.
    EXPECT_NEAR(t->logprob, std::log(softmax({5.0, 0.0, 1.0, 4.0})[static_cast<size_t>(t->token)]), 1e-5);
  }
  std::vector<double> probs;
  ASSERT_TRUE(sampler.processed_probs(logits, hot, {}, probs, allowed).ok());
  EXPECT_EQ(probs[0], 0.0);
  EXPECT_EQ(probs[3], 0.0);
  EXPECT_NEAR(probs[1] + probs[2], 1.0, 1e-12);
}

TEST(SamplerMask, NothingAllowedIsAnErrorThatKeepsTheStream) {
  const std::vector<float> logits = {1.0f, kNegInf, 2.0f};
  Sampler sampler;
  RngState rng = RngState::from_seed(3);
  const RngState before = rng;
  auto r = sampler.sample(logits, SamplingParams{}, {}, rng, std::vector<uint64_t>{1u << 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("structured-output"), std::string::npos);
  EXPECT_EQ(rng.uniform(), before.uniform());
  auto short_mask = sampler.sample(std::vector<float>(100, 0.0f), SamplingParams{}, {}, rng, std::vector<uint64_t>{1});
  EXPECT_FALSE(short_mask.ok());
}

}  // namespace
}  // namespace rlt::sampling
