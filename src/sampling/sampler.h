// The sampler: turns one row of logits into one token under a request's SamplingParams.
//
// Per row, in this order (docs/sampling.md "Processing order"):
//   0. the structured-output mask, when given: tokens it does not allow become -inf;
//   1. penalties (repetition; then frequency, presence), then logit_bias, on a f32 copy of the
//      logits;
//   2. temperature 0 -> argmax, first index among ties, done (no random draw);
//   3. subtract the row maximum, divide by the temperature (f32);
//   4. top-k (ties at the k-th value all kept);  5. top-p (strict `>`, first always kept);
//   6. min-p (relative to the most likely token);
//   7. one uniform u from the request's stream; the token is the first, in ascending id order,
//      whose cumulative weight exceeds u * (total weight of the surviving tokens).
// The request's RngState advances by exactly one block per returned token (greedy included).
// Logprobs, when asked for, are those of the raw model distribution (sampler_logprobs.h).
//
// Thread-safety: a Sampler owns scratch buffers; use one per thread. Params must have passed
// SamplingParams::validate(logits.size()); the sampler does not re-validate them.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "rlt/sampling_params.h"
#include "rlt/status.h"
#include "sampling/history.h"
#include "sampling/rng.h"

namespace rlt::sampling {

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

// The most likely tokens of a row, most likely first: a fixed-capacity list (range-for works), so
// that sampling never allocates.
struct TopLogprobs {
  std::array<TokenLogprob, SamplingParams::kMaxLogprobs> items{};
  int count = 0;

  const TokenLogprob* begin() const { return items.data(); }
  const TokenLogprob* end() const { return items.data() + count; }
  size_t size() const { return static_cast<size_t>(count); }
  bool empty() const { return count == 0; }
  const TokenLogprob& operator[](size_t i) const { return items[i]; }
};

struct SampledToken {
  int32_t token = -1;
  // Only when params.logprobs is set (else 0 and empty): the raw logprob of `token`, and the
  // *params.logprobs most likely tokens of the raw distribution, ties by lower id.
  float logprob = 0.0f;
  TopLogprobs top_logprobs;
};

// The temperature the sampler divides by: `temperature` as f32, saturated to the positive finite
// f32 range (a 0 or +inf factor would turn the arithmetic into NaNs). Device samplers use it too.
float temperature_f32(double temperature);
// The repetition penalty the sampler divides and multiplies by, saturated the same way.
float repetition_penalty_f32(double penalty);

class Sampler {
 public:
  // Samples one token from `logits` ([vocab] f32, the model's output row) and advances `rng`.
  // `allowed`: empty, or a bit per token id (ceil(vocab / 64) words, bit id % 64 of word id / 64)
  // — the structured-output mask; unset tokens are never sampled. Fails (leaving `rng`
  // unchanged) on an empty row, a NaN or +inf logit, a row with no finite allowed logit, or a
  // history id outside the vocabulary.
  Result<SampledToken> sample(std::span<const float> logits, const SamplingParams& params,
                              const TokenHistory& history, RngState& rng,
                              std::span<const uint64_t> allowed = {});

  // The distribution sample() draws from, as probabilities ([vocab], zero for removed tokens;
  // one-hot at the argmax when greedy). For tests and for speculative acceptance.
  Status processed_probs(std::span<const float> logits, const SamplingParams& params,
                         const TokenHistory& history, std::vector<double>& probs,
                         std::span<const uint64_t> allowed = {});

 private:
  // Steps 0-1: copies `logits` into work_ (masked), checks it and applies the penalties.
  Status apply_penalties(std::span<const float> logits, const SamplingParams& params,
                         const TokenHistory& history, std::span<const uint64_t> allowed);
  // Step 2: the first index of the largest value of work_.
  int32_t argmax() const;
  // Steps 3-6 on work_ (removed tokens become -inf), then weights_[i] = exp(work_[i]);
  // returns the total weight.
  double filter(const SamplingParams& params);
  void apply_top_k(int64_t k);
  void apply_top_p(double top_p);
  void apply_min_p(double min_p);

  std::vector<float> work_;      // [vocab] processed logits
  std::vector<float> kth_;       // [vocab] scratch for the top-k selection
  std::vector<uint64_t> keys_;   // top-p sort keys of the survivors (descending_key)
  std::vector<double> weights_;  // [vocab] unnormalized probabilities of the survivors
};

}  // namespace rlt::sampling
