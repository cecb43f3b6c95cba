// Logprobs of the raw model distribution: log_softmax of the logits row exactly as the model
// produced it — before penalties, temperature and filtering — as vLLM's default
// (`raw_logprobs`). They describe the model, not the sampling recipe, so they are comparable
// across requests with different params and usable as a policy's logprobs in RL rollouts.
//
// Accuracy: the log-sum-exp is accumulated in double and each value rounded once to f32.
#pragma once

#include <cstdint>
#include <span>

#include "rlt/status.h"
#include "sampling/sampler.h"

namespace rlt::sampling {

// Fills out.logprob with the logprob of out.token and out.top_logprobs with the
// min(num_top, vocab, kMaxLogprobs) most likely tokens (ties by lower id). `logits` must contain
// no NaN or +inf and at least one finite value (the sampler checks this first).
void fill_raw_logprobs(std::span<const float> logits, int num_top, SampledToken& out);

// A given token's raw logprob, the `num_top` most likely tokens and its rank: 1 + the tokens
// ranked before it (larger logit, ties by lower id: the top list's order).
struct ScoredToken {
  SampledToken token;  // token = the scored id
  int32_t rank = 0;
};

// Scores `target` in `logits` (prompt logprobs: the prompt's next token). Fails on a row the
// forward pass broke (NaN, +inf, no finite value) or a target outside it.
Result<ScoredToken> score_token(std::span<const float> logits, int32_t target, int num_top);

}  // namespace rlt::sampling
