#include "sampling/device_rows.h"

#include <cmath>
#include <limits>
#include <span>

#include "sampling/sampler.h"

static_assert(rlt::sampling::kMaxDeviceLogprobs == rlt::SamplingParams::kMaxLogprobs,
              "a device sampler returns as many logprobs as a request may ask for");

namespace rlt::sampling {

void DeviceSampleRows::clear() {
  params.clear();
  history_ids.clear();
  history_counts.clear();
  any_top_p = any_penalties = any_logprobs = any_logit_bias = false;
  ids_in_vocab = true;
}

void DeviceSampleRows::add(const SamplingParams& p, const TokenHistory* history, double uniform,
                           int64_t vocab) {
  DeviceSampleParams& d = params.emplace_back();
  any_logit_bias |= !p.logit_bias.empty();
  if (p.logprobs) {
    d.logprobs = *p.logprobs;
    any_logprobs = true;
  }
  if (p.has_penalties() && history != nullptr) {
    d.repetition = repetition_penalty_f32(p.repetition_penalty);
    d.frequency = static_cast<float>(p.frequency_penalty);
    d.presence = static_cast<float>(p.presence_penalty);
    auto append = [&](std::span<const int32_t> ids, std::span<const int32_t> counts) {
      for (size_t j = 0; j < ids.size(); ++j) {
        ids_in_vocab &= ids[j] >= 0 && ids[j] < vocab;
        history_ids.push_back(ids[j]);
        history_counts.push_back(counts.empty() ? 0 : counts[j]);
      }
    };
    // The host applies the repetition penalty whenever it is not exactly 1 (as a double); once
    // saturated to f32 it may be 1, which changes nothing, so the device skips it then.
    d.repeated_begin = static_cast<int32_t>(history_ids.size());
    if (d.repetition != 1.0f) append(history->distinct_tokens(), {});
    d.repeated_end = d.generated_begin = static_cast<int32_t>(history_ids.size());
    if (d.frequency != 0.0f || d.presence != 0.0f)
      append(history->generated_tokens(), history->generated_counts());
    d.generated_end = static_cast<int32_t>(history_ids.size());
    any_penalties = true;
  }
  if (p.greedy()) return;
  d.temperature = temperature_f32(p.temperature);
  d.top_k = p.top_k > 0 && p.top_k < vocab ? static_cast<int32_t>(p.top_k) : 0;
  d.top_p = p.top_p;
  any_top_p |= p.top_p < 1.0;
  d.log_min_p = p.min_p > 0.0 ? std::log(p.min_p) : -std::numeric_limits<double>::infinity();
  d.uniform = uniform;
}

}  // namespace rlt::sampling
