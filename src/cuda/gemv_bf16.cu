#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device.h"
#include "cuda/gemv_bf16.h"

namespace rlt::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}

// Each lane reads 8 consecutive bf16 (16 bytes) per step; lanes of a warp cover 256 columns.
__global__ void gemv_bf16_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                                 float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const uint16_t* wr = w + row * cols;
  float sum = 0.0f;
  const bool vector_ok = (cols % 8 == 0) && (reinterpret_cast<uintptr_t>(wr) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(x) % 16 == 0);
  int64_t c = 0;
  if (vector_ok) {
    for (c = static_cast<int64_t>(lane) * 8; c + 8 <= cols; c += kWarp * 8) {
      const uint4 packed = *reinterpret_cast<const uint4*>(wr + c);
      const float4 x0 = *reinterpret_cast<const float4*>(x + c);
      const float4 x1 = *reinterpret_cast<const float4*>(x + c + 4);
      sum +=
          bf16_bits_to_float(packed.x & 0xffffu) * x0.x + bf16_bits_to_float(packed.x >> 16) * x0.y;
      sum +=
          bf16_bits_to_float(packed.y & 0xffffu) * x0.z + bf16_bits_to_float(packed.y >> 16) * x0.w;
      sum +=
          bf16_bits_to_float(packed.z & 0xffffu) * x1.x + bf16_bits_to_float(packed.z >> 16) * x1.y;
      sum +=
          bf16_bits_to_float(packed.w & 0xffffu) * x1.z + bf16_bits_to_float(packed.w >> 16) * x1.w;
    }
  } else {
    for (c = lane; c < cols; c += kWarp) sum += bf16_bits_to_float(wr[c]) * x[c];
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) y[row] = sum;
}

}  // namespace

Status gemv_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 CUstream_st* stream) {
  if (rows <= 0) return {};
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  gemv_bf16_kernel<<<blocks, kWarpsPerBlock * kWarp, 0, stream>>>(w, x, y, rows, cols);
  return cuda_status(static_cast<int>(cudaGetLastError()), "gemv_bf16 launch");
}

}  // namespace rlt::cuda
