// Small helpers shared by the GPU benchmarks: event timing, error reporting, the device banner
// and the same-run copy bandwidth every figure is stated against.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "cuda/device.h"
#include "cuda/runtime.h"

namespace rlt::bench_cuda {

// Milliseconds of the best of `reps` runs of fn(), timed with events on `stream`.
template <typename Fn>
float best_ms(int reps, Fn&& fn, cudaStream_t stream = nullptr) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float best = 1e30f;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(start, stream);
    fn();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

inline bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fmt::print(stderr, "{}\n", cuda::cuda_status(static_cast<int>(e), what).to_string());
  return false;
}

// Prints the device line; false (after saying why) when there is no device to measure.
inline bool print_device() {
  const cuda::DeviceList list = cuda::list_devices();
  if (list.devices.empty()) {
    fmt::print("no CUDA device ({}): nothing to measure\n", list.why_none);
    return false;
  }
  const auto& d = list.devices.front();
  fmt::print("device: {} (sm_{}{}, {} SMs), kernels built for {}\n", d.name, d.compute_major,
             d.compute_minor, d.multiprocessors, cuda::compiled_architectures());
  return true;
}

}  // namespace rlt::bench_cuda
