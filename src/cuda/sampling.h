// Sampling on the device with the host sampler's rules (engine/sampler.h), for rows without
// penalties or logprobs: greedy (temperature 0: the first index of the maximum), or temperature,
// top-k (ties at the k-th value kept), top-p (strict `>`, first token always kept, over the
// descending (value, id) order), min-p, then the inverse CDF in ascending id order at the
// request's uniform. The host computes what it would derive itself — the f32 temperature,
// ln(min_p), the uniform of the request's counter-based stream — so the device repeats the host's
// f32 arithmetic exactly; only double-precision sums are associated differently (and CUDA's exp is
// within 1 ulp), which moves a boundary by ~1e-16 of the total weight: the sampled token equals
// the host's unless the uniform lands within that distance of a boundary.
// C++17 and free of CUDA headers (the runner includes it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

struct CUstream_st;

namespace rlt::cuda {

struct DeviceSampleParams {
  float temperature = 0.0f;  // 0: greedy; else the host's positive_f32(temperature)
  int32_t top_k = 0;         // applied when 0 < top_k < vocab
  double top_p = 1.0;        // applied when < 1
  double log_min_p = 0.0;    // applied when min_p > 0: std::log(min_p); else -infinity
  double uniform = 0.0;      // the request's sampling uniform for this token, in [0, 1)
};

// Device memory sample_rows needs for `rows` x `vocab` logits.
size_t sampling_scratch_bytes(int64_t rows, int64_t vocab, bool any_top_p);

// Samples every row of logits[rows, vocab] under params[row] (device array). Per row:
// result[3r] = the token, result[3r + 1] = the first index holding NaN or +inf (-1 if none),
// result[3r + 2] = 1 if some value is finite (the row is valid iff result[3r + 1] < 0 and
// result[3r + 2] == 1; the token is meaningless otherwise); bad_value[r] = the value at
// result[3r + 1]. `any_top_p`: some row has top_p < 1 (sorts the rows). `scratch` holds
// sampling_scratch_bytes(rows, vocab, any_top_p) bytes, 256-byte aligned. Asynchronous.
Status sample_rows(const float* logits, int64_t rows, int64_t vocab,
                   const DeviceSampleParams* params, bool any_top_p, void* scratch, int32_t* result,
                   float* bad_value, CUstream_st* stream);

}  // namespace rlt::cuda
