#include "rlt/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace rlt {
namespace {

constexpr int64_t kVocab = 100;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Validates `p` with one field changed and returns the error message ("" when valid).
std::string error_with(const std::function<void(SamplingParams&)>& change) {
  SamplingParams p;
  change(p);
  const Status s = p.validate(kVocab);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  }
  return s.ok() ? "" : s.message();
}

TEST(SamplingParams, DefaultsAreValidAndDocumented) {
  const SamplingParams p;
  EXPECT_TRUE(p.validate(kVocab).ok());
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_k, -1);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.presence_penalty, 0.0);
  EXPECT_EQ(p.frequency_penalty, 0.0);
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_EQ(p.min_loops, 2);
  EXPECT_EQ(p.max_loops, 0);
  EXPECT_EQ(p.exit_threshold, 1.0);
  EXPECT_EQ(p.priority, 0);
  EXPECT_FALSE(p.greedy());
  EXPECT_FALSE(p.has_penalties());
}

TEST(SamplingParams, AcceptsTheEdgesOfEveryRange) {
  EXPECT_EQ(error_with([](SamplingParams& p) {
              p.max_tokens = 1;
              p.temperature = 0.0;
              p.top_k = 0;
              p.top_p = 1e-9;
              p.min_p = 1.0;
              p.seed = SamplingParams::kMaxSeed;
              p.repetition_penalty = 1e-3;
              p.presence_penalty = -2.0;
              p.frequency_penalty = 2.0;
              p.stop_token_ids = {0, kVocab - 1};
              p.logprobs = 20;
              p.min_loops = 1;
              p.max_loops = 1;
              p.exit_threshold = 0.0;
              p.priority = -100;
            }),
            "");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.top_k = kVocab * 10; }), "")
      << "top_k above the vocabulary means keep all";
  EXPECT_EQ(error_with([](SamplingParams& p) { p.logprobs = 0; }), "");
}

TEST(SamplingParams, ErrorsNameTheFieldTheRangeAndTheValue) {
  EXPECT_EQ(error_with([](SamplingParams& p) { p.max_tokens = 0; }),
            "max_tokens must be >= 1, got 0");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.temperature = -0.5; }),
            "temperature must be finite and >= 0 (0 = greedy), got -0.5");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.temperature = kNan; }),
            "temperature must be finite and >= 0 (0 = greedy), got nan");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.temperature = kInf; }),
            "temperature must be finite and >= 0 (0 = greedy), got inf");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.top_k = -2; }),
            "top_k must be -1 or 0 (off) or >= 1, got -2");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.top_p = 0.0; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.top_p = 1.5; }),
            "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.top_p = kNan; }),
            "top_p must be in (0, 1], got nan");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.min_p = -0.1; }),
            "min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.min_p = 1.01; }),
            "min_p must be in [0, 1], got 1.01");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.repetition_penalty = 0.0; }),
            "repetition_penalty must be finite and > 0, got 0");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.repetition_penalty = kInf; }),
            "repetition_penalty must be finite and > 0, got inf");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.presence_penalty = 2.5; }),
            "presence_penalty must be in [-2, 2], got 2.5");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.presence_penalty = kNan; }),
            "presence_penalty must be in [-2, 2], got nan");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.frequency_penalty = -2.01; }),
            "frequency_penalty must be in [-2, 2], got -2.01");
  EXPECT_EQ(error_with([](SamplingParams& p) {
              p.stop_token_ids = {5, kVocab};
            }),
            "stop_token_ids[1] must be in [0, 100) (the vocabulary), got 100");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.stop_token_ids = {-1}; }),
            "stop_token_ids[0] must be in [0, 100) (the vocabulary), got -1");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.logprobs = 21; }),
            "logprobs must be in [0, 20], got 21");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.logprobs = -1; }),
            "logprobs must be in [0, 20], got -1");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.prompt_logprobs = 21; }),
            "prompt_logprobs must be in [0, 20], got 21");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.seed = SamplingParams::kMaxSeed + 1; }),
            "seed must be in [0, 2^63 - 1], got 9223372036854775808");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.min_loops = 0; }),
            "min_loops must be >= 1, got 0");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.max_loops = -1; }),
            "max_loops must be >= 1, or 0 for the model's depth, got -1");
  EXPECT_EQ(error_with([](SamplingParams& p) {
              p.min_loops = 3;
              p.max_loops = 2;
            }),
            "min_loops must be in [1, max_loops=2], got 3");
  EXPECT_EQ(error_with([](SamplingParams& p) { p.exit_threshold = 1.5; }),
            "exit_threshold must be in [0, 1], got 1.5");
  EXPECT_EQ(SamplingParams{}.validate(0).message(), "vocab_size must be >= 1, got 0");
}

TEST(SamplingParams, LogitBiasIdsRangesAndDuplicates) {
  SamplingParams p;
  p.logit_bias = {{0, -100.0f}, {9, 100.0f}};
  EXPECT_TRUE(p.validate(10).ok());
  auto message = [&](std::vector<std::pair<int32_t, float>> bias) {
    p.logit_bias = std::move(bias);
    const Status s = p.validate(10);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_NE(message({{10, 1.0f}}).find("logit_bias names token 10, outside the vocabulary"),
            std::string::npos);
  EXPECT_NE(message({{-1, 1.0f}}).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(message({{1, 100.5f}}).find("logit_bias for token 1 must be in [-100, 100]"),
            std::string::npos);
  EXPECT_NE(message({{1, std::nanf("")}}).find("[-100, 100]"), std::string::npos);
  EXPECT_NE(message({{1, 1.0f}, {1, 2.0f}}).find("twice"), std::string::npos);
  std::vector<std::pair<int32_t, float>> many;
  for (int32_t i = 0; i < 1025; ++i) many.push_back({i, 0.0f});
  p.logit_bias = many;
  EXPECT_NE(p.validate(2000).message().find("at most 1024"), std::string::npos);
}

TEST(SamplingParams, DefaultMinLoopsIsNotAnErrorBelowIt) {
  // resolve_exit_params clamps the *default* min_loops to a smaller max_loops.
  EXPECT_EQ(error_with([](SamplingParams& p) { p.max_loops = 1; }), "");
}

TEST(SamplingParams, ValidateLoopsMirrorsResolveExitParams) {
  SamplingParams p;
  EXPECT_TRUE(p.validate_loops(4).ok());
  EXPECT_TRUE(p.validate_loops(1).ok()) << "default min_loops clamps to a 1-loop model";
  p.max_loops = 5;
  EXPECT_EQ(p.validate_loops(4).message(),
            "max_loops must be in [1, 4] (the model's total_ut_steps), got 5");
  p.max_loops = 3;
  p.min_loops = 4;
  EXPECT_EQ(p.validate_loops(4).message(), "min_loops must be in [1, max_loops=3], got 4");
  p = SamplingParams{};
  p.min_loops = 3;
  EXPECT_EQ(p.validate_loops(2).message(), "min_loops must be in [1, max_loops=2], got 3");
  p = SamplingParams{};
  p.exit_threshold = -0.1;
  EXPECT_EQ(p.validate_loops(4).message(), "exit_threshold must be in [0, 1], got -0.1");
}

TEST(SamplingParams, GreedyAndPenaltyPredicates) {
  SamplingParams p;
  p.temperature = 0.0;
  EXPECT_TRUE(p.greedy());
  p.presence_penalty = 0.1;
  EXPECT_TRUE(p.has_penalties());
}

}  // namespace
}  // namespace rlt
