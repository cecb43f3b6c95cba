// CUDA devices as this process sees them, and CUDA runtime errors as Status. No CUDA header here:
// callers that only report devices stay light.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlt/status.h"

namespace rlt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int64_t memory_bytes = 0;
  int multiprocessors = 0;
};

struct DeviceList {
  std::vector<DeviceInfo> devices;
  std::string why_none;  // when `devices` is empty: the runtime's reason (no driver, no device)
};

// Never fails for a missing driver or device: that is an empty list with the reason.
DeviceList list_devices();

// "sm_80, sm_90a, ..." — what this build compiled its kernels for.
std::string compiled_architectures();

// The current device's free and total memory (cudaMemGetInfo), in bytes.
struct MemoryInfo {
  int64_t free = 0, total = 0;
};
Result<MemoryInfo> memory_info();

// Turns a cudaError_t (passed as int to keep CUDA headers out) into a Status naming `what`.
Status cuda_status(int error, const std::string& what);

}  // namespace rlt::cuda
