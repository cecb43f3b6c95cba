#include "sampling/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "sampling/logprobs.h"

namespace rlt::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kMaxFloat = std::numeric_limits<float>::max();

// f32 of a validated positive parameter, saturated: casting a double outside the f32 range is
// undefined, and a 0 or +inf factor would turn the arithmetic into NaNs (0/0, 0*inf).
float positive_f32(double v) {
  return static_cast<float>(
      std::clamp(v, static_cast<double>(std::numeric_limits<float>::denorm_min()),
                 static_cast<double>(kMaxFloat)));
}

float clamp_finite(float x) {
  return std::clamp(x, -kMaxFloat, kMaxFloat);
}

Status check_history_id(int32_t id, size_t vocab) {
  if (id < 0 || static_cast<size_t>(id) >= vocab) {
    return invalid_argument(fmt::format(
        "token id {} in the request's history is outside the vocabulary [0, {})", id, vocab));
  }
  return Status::ok_status();
}

// A sort key whose ascending order is descending value, then ascending id: a strict total order
// on (value, id), so sorting keys equals a stable descending sort of the ids, and sorting only a
// prefix gives the same prefix. The value's bits are mapped so that unsigned order is float
// order (negatives flipped whole, positives get the sign bit), then complemented.
uint64_t descending_key(float value, int32_t id) {
  if (value == 0.0f) value = 0.0f;  // -0 and +0 are equal values: tie-break by id
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (uint64_t{~bits} << 32) | static_cast<uint32_t>(id);
}

}  // namespace

Status Sampler::apply_penalties(std::span<const float> logits, const SamplingParams& params,
                                const TokenHistory& history, std::span<const uint64_t> allowed) {
  if (logits.empty()) return invalid_argument("cannot sample from an empty logits row");
  const size_t vocab = logits.size();
  if (!allowed.empty() && allowed.size() * 64 < vocab) {
    return invalid_argument(fmt::format("the token mask covers {} ids, the logits row {}", allowed.size() * 64, vocab));
  }
  work_.resize(vocab);
  // Copy, masking disallowed ids, and note whether any value is NaN or +inf (the forward pass
  // broke; -inf is a legitimate mask) and whether an allowed one is finite — on the values' bits,
  // without branches, which the compiler vectorizes: a row is the whole vocabulary, and a
  // speculative verification samples several. Only a broken row is walked again, for the message.
  constexpr uint32_t kMagnitude = 0x7fffffffu, kInfBits = 0x7f800000u, kNegInfBits = 0xff800000u;
  uint32_t broken = 0, any_finite = 0;
  const float* x = logits.data();
  // The value's bits at i (a load; the copy keeps the compiler's aliasing rules).
  auto bits = [x](size_t i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    return u;
  };
  for (size_t i = 0; i < vocab; ++i) {
    const uint32_t u = bits(i);
    broken |= static_cast<uint32_t>((u & kMagnitude) >= kInfBits) & static_cast<uint32_t>(u != kNegInfBits);
    any_finite |= static_cast<uint32_t>((u & kMagnitude) < kInfBits);
  }
  if (allowed.empty()) {
    std::copy(x, x + vocab, work_.begin());
  } else {  // only an allowed value counts
    any_finite = 0;
    for (size_t i = 0; i < vocab; ++i) {
      const uint32_t ok = static_cast<uint32_t>((allowed[i >> 6] >> (i & 63)) & 1);
      any_finite |= ok & static_cast<uint32_t>((bits(i) & kMagnitude) < kInfBits);
      work_[i] = ok ? x[i] : kNegInf;
    }
  }
  if (broken) {
    for (size_t i = 0; i < vocab; ++i) {
      if (std::isnan(x[i]) || x[i] == std::numeric_limits<float>::infinity()) {
        return invalid_argument(fmt::format("logits[{}] is {}", i, x[i]));
      }
    }
  }
  if (!any_finite) {
    return invalid_argument(allowed.empty() ? "the logits row has no finite value"
                                            : "no token is allowed here: the structured-output constraint "
                                              "admits none (or only tokens whose logits are -inf)");
  }

  // In f32, as vLLM applies penalties to the f32 logits. Repetition first (over prompt and
  // generated ids), then frequency, then presence (generated ids only) — vLLM's order.
  // Results are clamped to the finite f32 range: an extreme (but valid) penalty then still ranks
  // the token first or last instead of creating an infinity or masking the whole row.
  if (params.repetition_penalty != 1.0) {
    const float penalty = repetition_penalty_f32(params.repetition_penalty);
    for (int32_t id : history.distinct_tokens()) {
      RLT_RETURN_IF_ERROR(check_history_id(id, vocab));
      float& x = work_[id];
      if (x != kNegInf) x = clamp_finite(x > 0.0f ? x / penalty : x * penalty);
    }
  }
  if (params.frequency_penalty != 0.0 || params.presence_penalty != 0.0) {
    const float frequency = static_cast<float>(params.frequency_penalty);
    const float presence = static_cast<float>(params.presence_penalty);
    const auto ids = history.generated_tokens();
    const auto counts = history.generated_counts();
    for (size_t j = 0; j < ids.size(); ++j) {
      RLT_RETURN_IF_ERROR(check_history_id(ids[j], vocab));
      float& x = work_[ids[j]];
      if (x == kNegInf) continue;
      x -= frequency * static_cast<float>(counts[j]);
      x -= presence;
      x = clamp_finite(x);
    }
  }
  // OpenAI's logit_bias, after the penalties (as vLLM); a masked token stays masked.
  for (const auto& [id, bias] : params.logit_bias) {
    float& x = work_[static_cast<size_t>(id)];
    if (x != kNegInf) x = clamp_finite(x + bias);
  }
  return Status::ok_status();
}

int32_t Sampler::argmax() const {
  // The maximum as sixteen interleaved partial maxima (exact in any order; vectorized), then the
  // first index holding it: the first among ties, torch.argmax's documented choice (-0 and +0
  // are equal, so a tie between them too goes to the first). work_ holds no NaN.
  constexpr size_t kParts = 16;
  const size_t n = work_.size();
  float part[kParts];
  std::fill(part, part + kParts, kNegInf);
  size_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (size_t j = 0; j < kParts; ++j) part[j] = work_[i + j] > part[j] ? work_[i + j] : part[j];
  for (; i < n; ++i) part[0] = work_[i] > part[0] ? work_[i] : part[0];
  const float best = *std::max_element(part, part + kParts);
  for (size_t k = 0; k < n; ++k)
    if (work_[k] == best) return static_cast<int32_t>(k);
  return 0;  // every value -inf: index 0, as before
}

void Sampler::apply_top_k(int64_t k) {
  // The k-th largest value is the threshold; every logit >= it survives, so ties at the
  // threshold are all kept (more than k tokens may survive), as vLLM and vllm-rlt.
  kth_.assign(work_.begin(), work_.end());
  std::nth_element(kth_.begin(), kth_.begin() + (k - 1), kth_.end(), std::greater<float>());
  const float threshold = kth_[k - 1];
  for (float& x : work_) {
    if (x < threshold) x = kNegInf;
  }
}

void Sampler::apply_top_p(double top_p) {
  // The normalizer over every survivor, summed in ascending id order.
  double total = 0.0;
  keys_.clear();
  for (size_t i = 0; i < work_.size(); ++i) {
    if (work_[i] == kNegInf) continue;
    keys_.push_back(descending_key(work_[i], static_cast<int32_t>(i)));
    total += std::exp(static_cast<double>(work_[i]));
  }
  // Softmax in descending order, then the cumulative sum. A token is removed when the
  // cumulative probability *before* it already exceeds top_p (strict): the "remove where
  // cumsum > top_p, shifted right by one" rule; the first token always stays. The kept set is
  // usually a small head of the row, so sort a prefix and grow it 4x at a time.
  const auto id_at = [&](size_t j) { return static_cast<uint32_t>(keys_[j]); };
  const size_t n = keys_.size();
  size_t keep = n;
  size_t checked = 0;
  double cumulative = 0.0;
  for (size_t sorted = std::min<size_t>(n, 256); keep == n; sorted = std::min(n, sorted * 4)) {
    // Selection then sort: O(n + m log m) per round, against partial_sort's O(n log m).
    if (sorted < n) std::nth_element(keys_.begin() + checked, keys_.begin() + sorted, keys_.end());
    std::sort(keys_.begin() + checked, keys_.begin() + sorted);
    for (; checked < sorted; ++checked) {
      cumulative += std::exp(static_cast<double>(work_[id_at(checked)])) / total;
      if (cumulative > top_p) {
        keep = checked + 1;
        break;
      }
    }
    if (sorted == n) break;
  }
  for (size_t j = keep; j < n; ++j) work_[id_at(j)] = kNegInf;
}

void Sampler::apply_min_p(double min_p) {
  // p_i < min_p * p_max  <=>  x_i - x_max < ln(min_p): the normalizer cancels, so the rule does
  // not depend on what top-k/top-p removed, and needs no exp. After filter()'s shift, x_max = 0.
  const double threshold = std::log(min_p);
  for (float& x : work_) {
    if (static_cast<double>(x) < threshold) x = kNegInf;
  }
}

float temperature_f32(double temperature) {
  return positive_f32(temperature);
}

float repetition_penalty_f32(double penalty) {
  return positive_f32(penalty);
}

double Sampler::filter(const SamplingParams& params) {
  // Shift by the maximum *before* dividing: softmax is shift-invariant, and the shifted values
  // are <= 0, so a tiny temperature can underflow them to -inf but never overflow to +inf.
  const float max = work_[argmax()];
  const float temperature = temperature_f32(params.temperature);
  for (float& x : work_) {
    if (x != kNegInf) x = (x - max) / temperature;
  }

  const auto vocab = static_cast<int64_t>(work_.size());
  if (params.top_k > 0 && params.top_k < vocab) apply_top_k(params.top_k);
  if (params.top_p < 1.0) apply_top_p(params.top_p);
  if (params.min_p > 0.0) apply_min_p(params.min_p);

  weights_.resize(work_.size());
  double total = 0.0;
  for (size_t i = 0; i < work_.size(); ++i) {
    weights_[i] = work_[i] == kNegInf ? 0.0 : std::exp(static_cast<double>(work_[i]));
    total += weights_[i];
  }
  return total;  // >= 1: the maximum's weight is exp(0)
}

Result<SampledToken> Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                                     const TokenHistory& history, RngState& rng,
                                     std::span<const uint64_t> allowed) {
  RLT_RETURN_IF_ERROR(apply_penalties(logits, params, history, allowed));
  SampledToken out;
  if (params.greedy()) {
    out.token = argmax();
  } else {
    const double total = filter(params);
    // Inverse CDF in ascending id order: the first id whose cumulative weight exceeds u * total.
    // Zero-weight ids can never be chosen (strict `>`); the fallback covers u * total rounding
    // up to the full total.
    const double target = rng.uniform() * total;
    double cumulative = 0.0;
    out.token = -1;
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (weights_[i] == 0.0) continue;
      cumulative += weights_[i];
      out.token = static_cast<int32_t>(i);
      if (cumulative > target) break;
    }
  }
  rng.advance();
  if (params.logprobs) fill_raw_logprobs(logits, *params.logprobs, out);
  return out;
}

Status Sampler::processed_probs(std::span<const float> logits, const SamplingParams& params,
                                const TokenHistory& history, std::vector<double>& probs,
                                std::span<const uint64_t> allowed) {
  RLT_RETURN_IF_ERROR(apply_penalties(logits, params, history, allowed));
  probs.assign(logits.size(), 0.0);
  if (params.greedy()) {
    probs[argmax()] = 1.0;
    return Status::ok_status();
  }
  const double total = filter(params);
  for (size_t i = 0; i < probs.size(); ++i) probs[i] = weights_[i] / total;
  return Status::ok_status();
}

}  // namespace rlt::sampling
