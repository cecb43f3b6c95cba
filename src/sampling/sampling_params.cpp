#include "rlt/sampling_params.h"

#include <fmt/format.h>

#include <cmath>

namespace rlt {
namespace {

// Comparisons are written so that NaN fails them: `!(lo <= x && x <= hi)` rejects NaN.
bool in_closed(double x, double lo, double hi) {
  return lo <= x && x <= hi;
}

// Every message of validate / validate_loops about a request field begins with its name, as the
// request spells it: the server reports it as the error's `param` (prompt_builder.cpp).
Status range_error(std::string_view field, std::string_view range, double value) {
  return invalid_argument(fmt::format("{} must be {}, got {}", field, range, value));
}

}  // namespace

Status SamplingParams::validate(int64_t vocab_size) const {
  if (vocab_size < 1) {
    return invalid_argument(fmt::format("vocab_size must be >= 1, got {}", vocab_size));
  }
  if (max_tokens < 1) {
    return invalid_argument(fmt::format("max_tokens must be >= 1, got {}", max_tokens));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    const int32_t id = stop_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return invalid_argument(fmt::format(
          "stop_token_ids[{}] must be in [0, {}) (the vocabulary), got {}", i, vocab_size, id));
    }
  }
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0)) {
    return range_error("repetition_penalty", "finite and > 0", repetition_penalty);
  }
  if (!in_closed(frequency_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return range_error("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  if (!in_closed(presence_penalty, -kMaxAbsPenalty, kMaxAbsPenalty)) {
    return range_error("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (logit_bias.size() > kMaxLogitBias) {
    return invalid_argument(fmt::format("logit_bias holds {} tokens; at most {} are accepted",
                                        logit_bias.size(), kMaxLogitBias));
  }
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [id, bias] = logit_bias[i];
    if (id < 0 || id >= vocab_size) {
      return invalid_argument(
          fmt::format("logit_bias names token {}, outside the vocabulary [0, {})", id, vocab_size));
    }
    if (!in_closed(bias, -kMaxAbsLogitBias, kMaxAbsLogitBias)) {
      return invalid_argument(
          fmt::format("logit_bias for token {} must be in [-100, 100], got {}", id, bias));
    }
    for (size_t j = 0; j < i; ++j) {
      if (logit_bias[j].first == id)
        return invalid_argument(fmt::format("logit_bias names token {} twice", id));
    }
  }
  if (!(std::isfinite(temperature) && temperature >= 0.0)) {
    return range_error("temperature", "finite and >= 0 (0 = greedy)", temperature);
  }
  if (top_k < -1) {
    return invalid_argument(fmt::format("top_k must be -1 or 0 (off) or >= 1, got {}", top_k));
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) return range_error("top_p", "in (0, 1]", top_p);
  if (!in_closed(min_p, 0.0, 1.0)) return range_error("min_p", "in [0, 1]", min_p);
  if (seed && *seed > kMaxSeed) {
    return invalid_argument(fmt::format("seed must be in [0, 2^63 - 1], got {}", *seed));
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return invalid_argument(
        fmt::format("logprobs must be in [0, {}], got {}", kMaxLogprobs, *logprobs));
  }
  if (prompt_logprobs && (*prompt_logprobs < 0 || *prompt_logprobs > kMaxLogprobs)) {
    return invalid_argument(
        fmt::format("prompt_logprobs must be in [0, {}], got {}", kMaxLogprobs, *prompt_logprobs));
  }
  if (min_loops < 1) {
    return invalid_argument(fmt::format("min_loops must be >= 1, got {}", min_loops));
  }
  if (max_loops < 0) {
    return invalid_argument(
        fmt::format("max_loops must be >= 1, or 0 for the model's depth, got {}", max_loops));
  }
  // An explicit min_loops above an explicit max_loops can never be satisfied, whatever the model;
  // the default min_loops is clamped instead (validate_loops).
  if (max_loops > 0 && min_loops > max_loops && min_loops != kDefaultMinLoops) {
    return invalid_argument(
        fmt::format("min_loops must be in [1, max_loops={}], got {}", max_loops, min_loops));
  }
  if (!in_closed(exit_threshold, 0.0, 1.0)) {
    return range_error("exit_threshold", "in [0, 1]", exit_threshold);
  }
  if (speculative) {
    if (speculative->num_tokens < 0 || speculative->num_tokens > SpeculativeConfig::kMaxTokens) {
      return invalid_argument(fmt::format("speculative.num_tokens must be in [0, {}] (0: the engine's), got {}",
                                          SpeculativeConfig::kMaxTokens, speculative->num_tokens));
    }
    if (speculative->draft_loops < 0) {
      return invalid_argument(fmt::format("speculative.draft_loops must be >= 1, or 0 for the engine's, got {}",
                                          speculative->draft_loops));
    }
  }
  return Status::ok_status();
}

Status SamplingParams::validate_loops(int64_t total_loops) const {
  const int64_t max = max_loops == 0 ? total_loops : max_loops;
  if (max < 1 || max > total_loops) {
    return invalid_argument(fmt::format(
        "max_loops must be in [1, {}] (the model's total_ut_steps), got {}", total_loops, max));
  }
  int64_t min = min_loops;
  if (min > max && min == kDefaultMinLoops) min = max;
  if (min < 1 || min > max) {
    return invalid_argument(
        fmt::format("min_loops must be in [1, max_loops={}], got {}", max, min));
  }
  if (!in_closed(exit_threshold, 0.0, 1.0)) {
    return range_error("exit_threshold", "in [0, 1]", exit_threshold);
  }
  return Status::ok_status();
}

}  // namespace rlt
