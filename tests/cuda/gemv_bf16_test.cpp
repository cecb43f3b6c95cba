#include "cuda/gemv_bf16.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/half.h"
#include "gpu_test_util.h"

namespace rlt::cuda {
namespace {

// Device memory for a test, freed on scope exit.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(const std::vector<T>& host) {
    EXPECT_EQ(cudaMalloc(&ptr, host.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr); }
};

// Same bound as the CPU kernels: the f32 sum of k products is within 8·k·2⁻²⁴·Σ|x·w| of float64.
TEST(GemvBf16, MatchesFloat64OnOuroShapesAndOddSizes) {
  RLT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  const int64_t shapes[][2] = {{1, 1},       {7, 13},      {33, 256},   {100, 1000},
                               {2048, 2048}, {5632, 2048}, {2048, 5632}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
    std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
    for (auto& v : w) v = f32_to_bf16(dist(rng));
    for (auto& v : x) v = dist(rng);
    DeviceArray<uint16_t> dw(w);
    DeviceArray<float> dx(x), dy(y);
    ASSERT_TRUE(gemv_bf16(dw.ptr, dx.ptr, dy.ptr, rows, cols, nullptr).ok());
    ASSERT_EQ(cudaMemcpy(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = double(bf16_to_f32(w[r * cols + c])) * double(x[c]);
        exact += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(y[r], exact, 8.0 * double(cols) * 0x1p-24 * magnitude + 1e-30)
          << rows << "x" << cols << " row " << r;
    }
  }
}

}  // namespace
}  // namespace rlt::cuda
