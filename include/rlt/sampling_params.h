// Per-request sampling and depth parameters: the public contract of how one request's tokens are
// chosen. Semantics, processing order, RNG and logprobs are specified in docs/sampling.md.
//
// Plain data: copy it freely; the engine validates it once, at admission, and the sampler trusts
// it afterwards.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt {

// A constraint on the generated text (docs/structured_output.md): every sampled token keeps the
// text a prefix of the constraint's language, and the end-of-sequence token is allowed only once
// the text is complete.
struct StructuredOutputs {
  enum class Kind : uint8_t {
    kJsonObject,  // any JSON object (response_format json_object)
    kJsonSchema,  // an instance of the JSON Schema in `spec`
    kRegex,       // a full match of the regular expression in `spec`
    kGrammar,     // a sentence of the GBNF grammar in `spec`
    kChoice,      // exactly one of `choices`
  };
  Kind kind = Kind::kJsonObject;
  std::string spec;
  std::vector<std::string> choices;
  friend bool operator==(const StructuredOutputs&, const StructuredOutputs&) = default;
};

// A request's speculative decoding (docs/speculative.md); absent fields take the engine's
// SpeculativeConfig. The output is plain decoding's whatever is chosen here: this only trades work.
struct SpeculativeParams {
  std::optional<SpeculativeMethod> method;  // absent: the engine's
  int32_t num_tokens = 0;   // drafts per step at most, in [0, SpeculativeConfig::kMaxTokens]; 0 = the engine's
  int32_t draft_loops = 0;  // self: loops a draft runs; 0 = the engine's
  friend bool operator==(const SpeculativeParams&, const SpeculativeParams&) = default;
};

struct SamplingParams {
  // Largest `logprobs` a request may ask for (OpenAI's completions limit, as vLLM).
  static constexpr int kMaxLogprobs = 20;
  // Presence and frequency penalties are limited to [-kMaxAbsPenalty, kMaxAbsPenalty] (OpenAI).
  static constexpr double kMaxAbsPenalty = 2.0;
  // User seeds lie in [0, kMaxSeed] so they survive JSON/Python int64 round trips (vllm-rlt).
  static constexpr uint64_t kMaxSeed = (uint64_t{1} << 63) - 1;
  // The default min_loops; resolve_exit_params clamps it (and only it) to a shallower model.
  static constexpr int64_t kDefaultMinLoops = 2;
  static constexpr size_t kMaxLogitBias = 1024;
  static constexpr double kMaxAbsLogitBias = 100.0;

  // --- length and stopping ---
  int64_t max_tokens = 16;              // generated tokens at most; >= 1
  std::vector<int32_t> stop_token_ids;  // extra ids that finish the request (the id is emitted)
  bool ignore_eos = false;              // keep going past the model's EOS id

  // --- the distribution (applied in this order; docs/sampling.md) ---
  double repetition_penalty = 1.0;  // > 0; 1 = off. Prompt + generated ids (vLLM/CTRL rule)
  double frequency_penalty = 0.0;   // [-2, 2]; per occurrence in the generated ids (OpenAI)
  double presence_penalty = 0.0;    // [-2, 2]; once per distinct generated id (OpenAI)
  // (token id, bias) pairs added to those tokens' logits after the penalties (OpenAI's
  // logit_bias: -100 bans a token, +100 all but forces it); ids distinct and in the vocabulary,
  // biases in [-100, 100], at most kMaxLogitBias entries.
  std::vector<std::pair<int32_t, float>> logit_bias;
  double temperature = 1.0;         // >= 0, finite; 0 = greedy (argmax, no random draw)
  int64_t top_k = -1;               // -1 or 0 = off; else keep the k largest (ties kept)
  double top_p = 1.0;               // (0, 1]; 1 = off
  double min_p = 0.0;               // [0, 1]; 0 = off; relative to the most likely token

  // Absent: the engine derives one from its own seed and the request id
  // (engine::derive_request_seed), so runs stay reproducible given the engine seed.
  std::optional<uint64_t> seed;

  // Absent: no logprobs. n: the sampled token's logprob plus the n most likely tokens'
  // (0 = the sampled token's only), from the raw model distribution; n in [0, kMaxLogprobs].
  std::optional<int> logprobs;

  // Absent: none. n: each prompt token's logprob after the tokens before it (the first token has
  // none) and the n most likely tokens there, from the raw distribution of the prefill pass at the
  // model's full depth; n in [0, kMaxLogprobs] (vLLM's prompt_logprobs, OpenAI's echo). Such a
  // request's prompt is computed whole: it neither reads nor feeds the prefix cache.
  std::optional<int> prompt_logprobs;

  // Absent: unconstrained. Compiled (and cached) by the engine at add_request; a constraint it
  // cannot compile fails the request there with the reason.
  std::optional<StructuredOutputs> structured_outputs;

  // Absent: the engine's speculative decoding settings (EngineConfig::speculative).
  std::optional<SpeculativeParams> speculative;

  // --- depth (early exit); the engine converts these to model::ExitParams ---
  int64_t min_loops = kDefaultMinLoops;  // >= 1
  int64_t max_loops = 0;                 // 0 = the model's depth (total_ut_steps)
  double exit_threshold = 1.0;           // [0, 1]; 1 = fixed depth
  ExitCriterion exit_criterion = ExitCriterion::kGate;
  std::optional<double> exit_criterion_threshold;  // absent: the criterion's default

  // --- scheduling ---
  int priority = 0;  // lower = more urgent (vLLM); orders admission under the priority policy

  bool greedy() const { return temperature == 0.0; }
  bool has_penalties() const {
    return repetition_penalty != 1.0 || frequency_penalty != 0.0 || presence_penalty != 0.0;
  }

  // Checks every field that does not depend on the model's depth. Errors are kInvalidArgument
  // and name the field, the allowed range and the value received.
  Status validate(int64_t vocab_size) const;
  // Checks min_loops/max_loops/exit_threshold against the model's depth with the same rules and
  // messages as model::resolve_exit_params (the engine may call either).
  Status validate_loops(int64_t total_loops) const;
};

}  // namespace rlt
