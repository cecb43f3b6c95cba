// The GPU runner's plan uploads: a pass's host int32 arrays (positions, write slots, lengths,
// tables, ...) copied to one fixed device buffer in a single transfer through a ring of pinned
// staging buffers, each reused once its previous copy has landed, so that planning the next batch
// never waits for the previous one. The device buffer is the one captured graphs read; it only
// grows (then `on_move` runs: graphs pointing at it must go). CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

#include "cuda/runtime.h"
#include "rlt/status.h"

namespace rlt::runner {

class GpuUploadRing {
 public:
  GpuUploadRing(cudaStream_t stream, std::function<void()> on_move)
      : stream_(stream), on_move_(std::move(on_move)) {}

  // Pinned staging and the device buffer, sized generously so that they rarely grow.
  Status init();
  // Copies `arrays` to the device in one transfer (256-byte aligned pieces); `device` gets their
  // device addresses, valid until the next upload() reuses the buffer's front.
  Status upload(std::initializer_list<std::span<const int32_t>> arrays,
                std::vector<const int32_t*>& device);

 private:
  struct Staging {
    cuda::PinnedBuffer buffer;
    cuda::Event landed;
    bool used = false;
  };
  cudaStream_t stream_;
  std::function<void()> on_move_;
  cuda::DeviceAllocation device_;
  // Eight: a batch uploads one or two plans (a shared-layout prefill wave two), so the host plans
  // several batches or waves ahead before it waits for the device.
  std::array<Staging, 8> staging_;
  size_t next_ = 0;
};

}  // namespace rlt::runner
