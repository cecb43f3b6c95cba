#include "runner/gpu_upload_ring.h"

#include <algorithm>

#include "cuda/device.h"

namespace rlt::runner {

Status GpuUploadRing::init() {
  for (Staging& st : staging_) {
    RLT_RETURN_IF_ERROR(st.buffer.reserve(size_t{1} << 20));  // grows with the plans
    RLT_ASSIGN_OR_RETURN(st.landed, cuda::Event::create(/*timing=*/false));
  }
  RLT_ASSIGN_OR_RETURN(device_,
                       cuda::DeviceAllocation::allocate(size_t{4} << 20, "attention metadata"));
  return {};
}

Status GpuUploadRing::upload(std::initializer_list<std::span<const int32_t>> arrays,
                             std::vector<const int32_t*>& device) {
  size_t total = 0;
  for (const auto& a : arrays) total += (a.size() + 63) / 64 * 64;  // 256-byte aligned pieces
  const size_t bytes = std::max<size_t>(total, 64) * sizeof(int32_t);
  // The host rewrites this staging slot below: its previous copy must have landed. With several
  // slots that copy is long done unless the device is far behind.
  Staging& staging = staging_[next_];
  next_ = (next_ + 1) % staging_.size();
  if (staging.used) RLT_RETURN_IF_ERROR(staging.landed.synchronize());
  RLT_RETURN_IF_ERROR(staging.buffer.reserve(bytes));
  if (device_.bytes() < bytes) {
    // Queued passes still read the old buffer.
    RLT_RETURN_IF_ERROR(cuda::synchronize_stream(stream_, "growing the plan buffer"));
    if (on_move_) on_move_();
    device_ = cuda::DeviceAllocation();
    RLT_ASSIGN_OR_RETURN(device_,
                         cuda::DeviceAllocation::allocate(bytes * 2, "attention metadata"));
  }
  auto* host = reinterpret_cast<int32_t*>(staging.buffer.data());
  const auto* dev = static_cast<const int32_t*>(device_.data());
  device.clear();
  size_t offset = 0;
  for (const auto& a : arrays) {
    std::copy(a.begin(), a.end(), host + offset);
    device.push_back(dev + offset);
    offset += (a.size() + 63) / 64 * 64;
  }
  RLT_RETURN_IF_ERROR(cuda::cuda_status(
      static_cast<int>(cudaMemcpyAsync(device_.data(), staging.buffer.data(),
                                       offset * sizeof(int32_t), cudaMemcpyHostToDevice, stream_)),
      "uploading the batch plan"));
  staging.used = true;
  return staging.landed.record(stream_);
}

}  // namespace rlt::runner
