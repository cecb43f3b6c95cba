// Sampling on the device with the host sampler's rules (sampling/sampler.h): penalties (repetition
// over the prompt and generated ids, then frequency and presence over the generated ids, in f32,
// clamped finite), then greedy (temperature 0: the first index of the maximum), or temperature,
// top-k (ties at the k-th value kept), top-p (strict `>`, first token always kept, over the
// descending (value, id) order), min-p, then the inverse CDF in ascending id order at the
// request's uniform; and the raw logprobs (the sampled token's and the most likely tokens', ties
// by lower id). The host computes what it would derive itself — the f32 temperature and
// penalties, ln(min_p), the uniform of the request's counter-based stream — so the device repeats
// the host's f32 arithmetic exactly; only double-precision sums are associated differently (and
// CUDA's exp and log are within 1 ulp), which moves a boundary by ~1e-16 of the total weight: the
// sampled token equals the host's unless the uniform lands within that distance of a boundary, and
// a logprob may differ from the host's in its last bit.
// C++17 and free of CUDA headers (the runner includes it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rlt/status.h"
#include "sampling/device_params.h"

struct CUstream_st;

namespace rlt::cuda {

// The row descriptions belong to the sampling module (sampling/device_params.h).
constexpr int kMaxDeviceLogprobs = sampling::kMaxDeviceLogprobs;
using DeviceSampleParams = sampling::DeviceSampleParams;
using DeviceLogprobs = sampling::DeviceLogprobs;

// One call of sample_rows; device pointers unless noted.
struct SampleBatch {
  const float* logits = nullptr;  // [rows, vocab]; never modified
  int64_t rows = 0, vocab = 0;
  const DeviceSampleParams* params = nullptr;  // [rows]
  // Known on the host (they size the scratch): some row has top_p < 1 (its keys are sorted),
  // penalties (it is copied before they apply), logprobs.
  bool any_top_p = false, any_penalties = false, any_logprobs = false;
  const int32_t* history_ids = nullptr;     // the penalties' id lists, < vocab
  const int32_t* history_counts = nullptr;  // parallel to history_ids (generated ranges)
  void* scratch = nullptr;                  // sampling_scratch_bytes(...) bytes, 256-byte aligned
  // Per row: result[3r] = the token, result[3r + 1] = the first index holding NaN or +inf (-1 if
  // none), result[3r + 2] = 1 if some value is finite (the row is valid iff result[3r + 1] < 0
  // and result[3r + 2] == 1; its token and logprobs are meaningless otherwise); bad_value[r] = the
  // value at result[3r + 1].
  int32_t* result = nullptr;
  float* bad_value = nullptr;
  DeviceLogprobs* logprobs = nullptr;  // [rows] when any_logprobs (rows without: count 0)
};

// The most logits one sample_rows call takes (rows x vocab): its kernels index them with int32.
inline constexpr int64_t kMaxDeviceSampleElements = 2147483647;

// Device memory sample_rows needs.
size_t sampling_scratch_bytes(int64_t rows, int64_t vocab, bool any_top_p, bool any_penalties,
                              bool any_logprobs);

// Samples every row of `batch` (asynchronously, on `stream`).
Status sample_rows(const SampleBatch& batch, CUstream_st* stream);

}  // namespace rlt::cuda
