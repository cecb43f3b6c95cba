// A test's device copy of a host vector (or an uninitialized device array), read back after the
// device finished.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cuda/runtime.h"

namespace rlt::cuda::testing {

template <typename T>
struct Dev {
  DeviceAllocation a;
  explicit Dev(const std::vector<T>& host) {
    a = DeviceAllocation::allocate(std::max<size_t>(1, host.size()) * sizeof(T), "test").value();
    EXPECT_EQ(cudaMemcpy(a.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit Dev(size_t n) {
    a = DeviceAllocation::allocate(std::max<size_t>(1, n) * sizeof(T), "test").value();
  }
  T* p() const { return static_cast<T*>(a.data()); }
  std::vector<T> read(size_t n) const {
    std::vector<T> out(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), a.data(), n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

}  // namespace rlt::cuda::testing
