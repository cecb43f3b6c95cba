// What the device sampler (cuda/sampling.h) needs for a batch of rows, derived from each
// request's sampling parameters, token history and uniform exactly as the host sampler derives
// them (the f32 temperature and repetition penalty, ln(min_p), the history lists). Plain host code
// (no CUDA), so that the translation is tested without a device.
#pragma once

#include <cstdint>
#include <vector>

#include "rlt/sampling_params.h"
#include "sampling/device_params.h"
#include "sampling/history.h"

namespace rlt::sampling {

struct DeviceSampleRows {
  std::vector<DeviceSampleParams> params;
  // The penalties' id lists of every row, back to back (DeviceSampleParams ranges index them);
  // counts are the generated counts (0 in the repetition ranges).
  std::vector<int32_t> history_ids, history_counts;
  bool any_top_p = false, any_penalties = false, any_logprobs = false;
  // A row with logit_bias: the device sampler has no bias step, so the batch goes to the host
  // sampler (the same rules, bit for bit).
  bool any_logit_bias = false;
  // False when a history id is outside the vocabulary: the batch must then go to the host
  // sampler, which reports it.
  bool ids_in_vocab = true;

  void clear();
  // Appends one row. `history` null: a request no longer live (its token is never read), sampled
  // without penalties.
  void add(const SamplingParams& p, const TokenHistory* history, double uniform, int64_t vocab);
};

}  // namespace rlt::sampling
