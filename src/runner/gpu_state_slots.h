// The GPU runner's per-request recurrent states: one row of a device buffer ([capacity, hidden]
// f32) per live request, the hidden vector carried between loops and stages, plus one padding
// slot that padding rows of CUDA-graph buckets gather and scatter. The buffer only grows (doubling,
// zeroed: padding rows read before anything wrote); growing moves it, so it calls `on_move`
// (captured graphs point at it). CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "cuda/runtime.h"
#include "kv/kv_types.h"
#include "rlt/status.h"

namespace rlt::runner {

class GpuStateSlots {
 public:
  GpuStateSlots(int64_t hidden, cudaStream_t stream, std::function<void()> on_move)
      : hidden_(hidden), stream_(stream), on_move_(std::move(on_move)) {}

  // Allocates the first slots and takes the padding slot.
  Status init();
  // At least `slots` request slots besides the padding slot.
  Status reserve(int32_t slots);
  // The slot of request `id`, taken on its first use.
  Result<int32_t> slot(kv::RequestId id);
  void release(kv::RequestId id);

  float* data() { return static_cast<float*>(states_.data()); }
  int32_t padding_slot() const { return padding_slot_; }

 private:
  Status grow();

  int64_t hidden_;
  cudaStream_t stream_;
  std::function<void()> on_move_;
  cuda::DeviceAllocation states_;
  int32_t capacity_ = 0;
  std::unordered_map<kv::RequestId, int32_t> slot_of_;
  std::vector<int32_t> free_;
  int32_t padding_slot_ = 0;
};

}  // namespace rlt::runner
