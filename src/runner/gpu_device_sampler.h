// The GPU runner's device sampler: samples a CODA batch's logits rows on the device with the
// host sampler's rules (cuda/sampling.h), into a pinned result slot that read() turns into the
// batch's tokens, errors and logprobs. Owns the results buffer and the sampling scratch, grown to
// the largest batch seen (after the queued work that may read them). CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/sampling.h"
#include "rlt/status.h"
#include "runner/model_runner.h"

namespace rlt::runner {

class GpuDeviceSampler {
 public:
  explicit GpuDeviceSampler(cudaStream_t stream = nullptr) : stream_(stream) {}
  void set_stream(cudaStream_t stream) { stream_ = stream; }

  // Buffers for a batch of `rows` rows of `vocab` logits (top-p, penalties and logprobs all asked).
  Status reserve(int64_t rows, int64_t vocab);
  // Enqueues sampling of `batch`'s rows (cuda::sample_rows; `batch` without its scratch and
  // outputs, which this fills in); the results go to `results`.
  Status sample(cuda::SampleBatch batch, cuda::PinnedBuffer& results);
  // The tokens (or the host sampler's errors) and logprobs from sample()'s results.
  static void read(const std::byte* results, int64_t n, bool logprobs, BatchResult* out);

 private:
  Status grow(cuda::DeviceAllocation& buffer, size_t bytes, const char* what);

  cudaStream_t stream_;
  cuda::DeviceAllocation buffer_;   // sampling results
  cuda::DeviceAllocation scratch_;  // cuda::sample_rows scratch
};

}  // namespace rlt::runner
