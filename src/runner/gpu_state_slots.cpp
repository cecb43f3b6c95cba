#include "runner/gpu_state_slots.h"

#include <algorithm>

#include "cuda/device.h"
#include "runner/cuda_check.h"

namespace rlt::runner {

Status GpuStateSlots::init() {
  RLT_RETURN_IF_ERROR(grow());
  padding_slot_ = free_.back();
  free_.pop_back();
  return {};
}

Status GpuStateSlots::reserve(int32_t slots) {
  while (capacity_ < slots + 1) RLT_RETURN_IF_ERROR(grow());
  return {};
}

Status GpuStateSlots::grow() {
  const int32_t grown = std::max(16, 2 * capacity_);
  RLT_ASSIGN_OR_RETURN(
      cuda::DeviceAllocation bigger,
      cuda::DeviceAllocation::allocate(static_cast<size_t>(grown * hidden_) * 4, "request states"));
  // Zeroed: padding rows read the padding slot before anything wrote it.
  RLT_RETURN_IF_ERROR(cuda_check(cudaMemsetAsync(bigger.data(), 0, bigger.bytes(), stream_),
                                 "clearing request states"));
  if (capacity_ > 0) {
    RLT_RETURN_IF_ERROR(cuda_check(cudaMemcpyAsync(bigger.data(), states_.data(), states_.bytes(),
                                                   cudaMemcpyDeviceToDevice, stream_),
                                   "growing request states"));
  }
  RLT_RETURN_IF_ERROR(cuda::synchronize_stream(stream_, "growing request states"));
  if (on_move_) on_move_();
  states_ = std::move(bigger);
  for (int32_t s = grown - 1; s >= capacity_; --s) free_.push_back(s);
  capacity_ = grown;
  return {};
}

Result<int32_t> GpuStateSlots::slot(kv::RequestId id) {
  if (auto it = slot_of_.find(id); it != slot_of_.end()) return it->second;
  if (free_.empty()) RLT_RETURN_IF_ERROR(grow());
  const int32_t s = free_.back();
  free_.pop_back();
  slot_of_[id] = s;
  return s;
}

void GpuStateSlots::release(kv::RequestId id) {
  if (auto it = slot_of_.find(id); it != slot_of_.end()) {
    free_.push_back(it->second);
    slot_of_.erase(it);
  }
}

}  // namespace rlt::runner
