#include "sampling/logprobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sampling/sampler.h"

namespace rlt::sampling {
namespace {

// Orders by value, larger first, then by lower id: a strict total order, so the list is
// deterministic whatever the tie structure.
bool ranks_before(float value_a, int32_t id_a, float value_b, int32_t id_b) {
  return value_a > value_b || (value_a == value_b && id_a < id_b);
}

}  // namespace

void fill_raw_logprobs(std::span<const float> logits, int num_top, SampledToken& out) {
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits) max = std::max(max, x);
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  // log_softmax(x)_i = x_i - (max + log(sum)); the f32 difference of two floats is exact in
  // double, so the only roundings are in exp/log and the final cast.
  const double log_normalizer = static_cast<double>(max) + std::log(sum);
  auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[id]) - log_normalizer);
  };
  out.logprob = logprob(out.token);

  TopLogprobs& top = out.top_logprobs;
  const int n = static_cast<int>(
      std::min<int64_t>({static_cast<int64_t>(num_top), static_cast<int64_t>(logits.size()),
                         static_cast<int64_t>(top.items.size())}));
  // One pass with a sorted buffer of the best n: O(vocab + insertions * n), no allocation.
  int count = 0;
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const float x = logits[i];
    if (count == n &&
        !ranks_before(x, id, logits[top.items[n - 1].token], top.items[n - 1].token)) {
      continue;
    }
    int pos = count < n ? count++ : n - 1;
    while (pos > 0 &&
           ranks_before(x, id, logits[top.items[pos - 1].token], top.items[pos - 1].token)) {
      top.items[pos] = top.items[pos - 1];
      --pos;
    }
    top.items[pos].token = id;
  }
  for (int j = 0; j < count; ++j) top.items[j].logprob = logprob(top.items[j].token);
  top.count = count;
}

Result<ScoredToken> score_token(std::span<const float> logits, int32_t target, int num_top) {
  if (target < 0 || static_cast<size_t>(target) >= logits.size()) {
    return invalid_argument(fmt::format("token {} is outside the logits row of {}", target, logits.size()));
  }
  bool any_finite = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      return invalid_argument(fmt::format("logits[{}] is {}", i, x));
    any_finite |= std::isfinite(x);
  }
  if (!any_finite) return invalid_argument("the logits row has no finite value");
  ScoredToken out;
  out.token.token = target;
  fill_raw_logprobs(logits, num_top, out.token);
  const float x = logits[static_cast<size_t>(target)];
  int32_t before = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    before += ranks_before(logits[i], static_cast<int32_t>(i), x, target) ? 1 : 0;
  out.rank = before + 1;
  return out;
}

}  // namespace rlt::sampling
