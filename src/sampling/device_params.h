// What a device sampler (cuda/sampling.h) reads of one row, and what it returns as logprobs: plain
// structs, C++17 and free of CUDA headers, so that the host derives them (device_rows.h) and tests
// them without a device, and the CUDA kernels read the same layout.
#pragma once

#include <cstdint>

namespace rlt::sampling {

constexpr int kMaxDeviceLogprobs =
    20;  // SamplingParams::kMaxLogprobs (static_assert in device_rows.cpp)

struct DeviceSampleParams {
  float temperature = 0.0f;  // 0: greedy; else the host's positive_f32(temperature)
  int32_t top_k = 0;         // applied when 0 < top_k < vocab
  double top_p = 1.0;        // applied when < 1
  double log_min_p = 0.0;    // applied when min_p > 0: std::log(min_p); else -infinity
  double uniform = 0.0;      // the request's sampling uniform for this token, in [0, 1)
  // Penalties: the repetition penalty (the host's positive_f32; 1: none) over
  // history_ids[repeated_begin, repeated_end) (every distinct prompt and generated id), then the
  // frequency and presence penalties over history_ids[generated_begin, generated_end) (every
  // distinct generated id) with their counts at the same positions of history_counts.
  float repetition = 1.0f, frequency = 0.0f, presence = 0.0f;
  int32_t repeated_begin = 0, repeated_end = 0, generated_begin = 0, generated_end = 0;
  int32_t logprobs = -1;  // -1: none; else how many top logprobs (0..kMaxDeviceLogprobs)
};

// The raw logprobs of one row (DeviceSampleParams::logprobs >= 0).
struct DeviceLogprobs {
  float logprob = 0.0f;  // the sampled token's
  int32_t count = 0;     // entries of ids / values, most likely first
  int32_t ids[kMaxDeviceLogprobs] = {};
  float values[kMaxDeviceLogprobs] = {};
};

}  // namespace rlt::sampling
