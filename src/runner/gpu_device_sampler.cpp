#include "runner/gpu_device_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "cuda/device.h"

namespace rlt::runner {

namespace {

static_assert(cuda::kMaxDeviceLogprobs == SamplingParams::kMaxLogprobs,
              "device logprobs hold as many entries as a request may ask for");

// Where sample() puts each part of its results (device buffer and pinned copy alike):
// 3 int32 per row, the offending value per row (f32), then the logprobs when asked for.
struct SampleResultLayout {
  size_t bad_values = 0, logprobs = 0, bytes = 0;
  SampleResultLayout(int64_t n, bool logprobs_asked) {
    bad_values = static_cast<size_t>(n) * 3 * sizeof(int32_t);
    logprobs = bad_values + static_cast<size_t>(n) * sizeof(float);
    bytes = logprobs + (logprobs_asked ? static_cast<size_t>(n) * sizeof(cuda::DeviceLogprobs) : 0);
  }
};

}  // namespace

Status GpuDeviceSampler::grow(cuda::DeviceAllocation& buffer, size_t bytes, const char* what) {
  if (buffer.bytes() >= bytes) return {};
  // A queued batch may still use it.
  RLT_RETURN_IF_ERROR(cuda::synchronize_stream(stream_, "growing a sampling buffer"));
  buffer = cuda::DeviceAllocation();
  RLT_ASSIGN_OR_RETURN(buffer, cuda::DeviceAllocation::allocate(bytes, what));
  return {};
}

Status GpuDeviceSampler::reserve(int64_t rows, int64_t vocab) {
  RLT_RETURN_IF_ERROR(grow(buffer_, SampleResultLayout(rows, true).bytes, "sampling results"));
  return grow(scratch_, cuda::sampling_scratch_bytes(rows, vocab, true, true, true),
              "sampling scratch");
}

Status GpuDeviceSampler::sample(cuda::SampleBatch batch, cuda::PinnedBuffer& results) {
  const SampleResultLayout layout(batch.rows, batch.any_logprobs);
  RLT_RETURN_IF_ERROR(grow(buffer_, layout.bytes, "sampling results"));
  RLT_RETURN_IF_ERROR(results.reserve(layout.bytes));
  auto* dev = static_cast<std::byte*>(buffer_.data());
  batch.result = reinterpret_cast<int32_t*>(dev);
  batch.bad_value = reinterpret_cast<float*>(dev + layout.bad_values);
  batch.logprobs =
      batch.any_logprobs ? reinterpret_cast<cuda::DeviceLogprobs*>(dev + layout.logprobs) : nullptr;
  const size_t scratch = cuda::sampling_scratch_bytes(batch.rows, batch.vocab, batch.any_top_p,
                                                      batch.any_penalties, batch.any_logprobs);
  RLT_RETURN_IF_ERROR(grow(scratch_, scratch, "sampling scratch"));
  batch.scratch = scratch_.data();
  RLT_RETURN_IF_ERROR(cuda::sample_rows(batch, stream_));
  return cuda::cuda_status(static_cast<int>(cudaMemcpyAsync(results.data(), dev, layout.bytes,
                                                            cudaMemcpyDeviceToHost, stream_)),
                           "reading sampled tokens");
}

void GpuDeviceSampler::read(const std::byte* results, int64_t n, bool logprobs, BatchResult* out) {
  const SampleResultLayout layout(n, logprobs);
  const auto* result = reinterpret_cast<const int32_t*>(results);
  const auto* bad_value = reinterpret_cast<const float*>(results + layout.bad_values);
  out->device_tokens.assign(static_cast<size_t>(n), -1);
  out->device_sample_errors.assign(static_cast<size_t>(n), std::string());
  for (int64_t r = 0; r < n; ++r) {
    // The host sampler's checks and messages, in its order.
    if (result[3 * r + 1] >= 0) {
      out->device_sample_errors[r] =
          fmt::format("logits[{}] is {}", result[3 * r + 1], bad_value[r]);
    } else if (result[3 * r + 2] == 0) {
      out->device_sample_errors[r] = "the logits row has no finite value";
    } else {
      out->device_tokens[r] = result[3 * r];
    }
  }
  if (!logprobs) return;
  const auto* lp = reinterpret_cast<const cuda::DeviceLogprobs*>(results + layout.logprobs);
  out->device_logprobs.assign(static_cast<size_t>(n), sampling::SampledToken());
  for (int64_t r = 0; r < n; ++r) {
    sampling::SampledToken& t = out->device_logprobs[static_cast<size_t>(r)];
    t.token = result[3 * r];
    t.logprob = lp[r].logprob;
    t.top_logprobs.count = std::clamp(lp[r].count, 0, SamplingParams::kMaxLogprobs);
    for (int j = 0; j < t.top_logprobs.count; ++j)
      t.top_logprobs.items[static_cast<size_t>(j)] = {lp[r].ids[j], lp[r].values[j]};
  }
}

}  // namespace rlt::runner
