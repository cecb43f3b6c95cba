#include "cuda/device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

namespace rlt::cuda {

Status cuda_status(int error, const std::string& what) {
  if (error == cudaSuccess) return {};
  const auto e = static_cast<cudaError_t>(error);
  return internal_error(fmt::format("{}: CUDA error {} ({}): {}", what, error, cudaGetErrorName(e),
                                    cudaGetErrorString(e)));
}

Result<MemoryInfo> memory_info() {
  size_t free = 0, total = 0;
  RLT_RETURN_IF_ERROR(
      cuda_status(static_cast<int>(cudaMemGetInfo(&free, &total)), "reading the device's memory"));
  return MemoryInfo{static_cast<int64_t>(free), static_cast<int64_t>(total)};
}

DeviceList list_devices() {
  DeviceList out;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    out.why_none = fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.devices.push_back({i, p.name, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem),
                           p.multiProcessorCount});
  }
  if (out.devices.empty()) out.why_none = "no CUDA device";
  return out;
}

std::string compiled_architectures() {
  std::string list = RLT_CUDA_ARCHITECTURES, out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (end > start) out += (out.empty() ? "sm_" : ", sm_") + list.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

}  // namespace rlt::cuda
