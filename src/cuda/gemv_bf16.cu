#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/device.h"
#include "cuda/gemv_bf16.h"
#include "cuda/launch.cuh"
#include "cuda/swiglu.cuh"

namespace rlt::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;
// 16-byte weight loads each lane issues before using any: a warp keeps 2 KiB in flight, which a
// row-per-warp GEMV needs to stream near the memory's bandwidth.
constexpr int kLoadsInFlight = 4;
constexpr int64_t kWarpStep = kWarp * 8;  // columns a warp covers per load

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) {
  return __uint_as_float(bits16 << 16);
}

// sum + the dot product of 8 bf16 weights with x[0..8), in a fixed order.
__device__ __forceinline__ float dot8(uint4 packed, const float* x, float sum) {
  const float4 x0 = __ldg(reinterpret_cast<const float4*>(x));
  const float4 x1 = __ldg(reinterpret_cast<const float4*>(x + 4));
  sum += bf16_bits_to_float(packed.x & 0xffffu) * x0.x + bf16_bits_to_float(packed.x >> 16) * x0.y;
  sum += bf16_bits_to_float(packed.y & 0xffffu) * x0.z + bf16_bits_to_float(packed.y >> 16) * x0.w;
  sum += bf16_bits_to_float(packed.z & 0xffffu) * x1.x + bf16_bits_to_float(packed.z >> 16) * x1.y;
  sum += bf16_bits_to_float(packed.w & 0xffffu) * x1.z + bf16_bits_to_float(packed.w >> 16) * x1.w;
  return sum;
}

// This lane's share of the dot product of row `wr` with x: lanes read 8 consecutive bf16 (16 bytes)
// per load and together cover 256 columns, and a lane sums its products in column order (so the
// unrolled loop gives the same bits as one load at a time). Weights are read once: streamed past
// L1, which keeps x.
__device__ __forceinline__ float lane_dot(const uint16_t* __restrict__ wr,
                                          const float* __restrict__ x, int64_t cols, int lane) {
  float sum = 0.0f;
  const bool vector_ok = (cols % 8 == 0) && (reinterpret_cast<uintptr_t>(wr) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(x) % 16 == 0);
  if (vector_ok) {
    int64_t c = static_cast<int64_t>(lane) * 8;
    for (; c + (kLoadsInFlight - 1) * kWarpStep + 8 <= cols; c += kLoadsInFlight * kWarpStep) {
      uint4 packed[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        packed[u] = __ldcs(reinterpret_cast<const uint4*>(wr + c + u * kWarpStep));
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) sum = dot8(packed[u], x + c + u * kWarpStep, sum);
    }
    for (; c + 8 <= cols; c += kWarpStep)
      sum = dot8(__ldcs(reinterpret_cast<const uint4*>(wr + c)), x + c, sum);
  } else {
    for (int64_t c = lane; c < cols; c += kWarp) sum += bf16_bits_to_float(wr[c]) * x[c];
  }
  return sum;
}

// The warp's total, valid in lane 0.
__device__ __forceinline__ float warp_total(float sum) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  return sum;
}

// One warp per output row.
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gemv_bf16_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                     float* __restrict__ y, int64_t rows, int64_t cols) {
  wait_for_upstream_kernels();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const float sum = warp_total(lane_dot(w + row * cols, x, cols, lane));
  if (lane == 0) y[row] = sum;
}

// One warp per activation: the gate row and the up row, each summed exactly as
// gemv_bf16_kernel sums it, then combined as silu_mul does.
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gemv_bf16_swiglu_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                            float* __restrict__ act, int64_t intermediate, int64_t cols) {
  wait_for_upstream_kernels();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= intermediate) return;
  const float gate = warp_total(lane_dot(w + row * cols, x, cols, lane));
  const float up = warp_total(lane_dot(w + (intermediate + row) * cols, x, cols, lane));
  if (lane == 0) act[row] = swiglu(gate, up);
}

Status launch_rows(void (*kernel)(const uint16_t*, const float*, float*, int64_t, int64_t),
                   const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                   CUstream_st* stream, const char* what) {
  if (rows <= 0) return {};
  const dim3 blocks(static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const cudaError_t e =
      launch(kernel, blocks, kWarpsPerBlock * kWarp, 0, stream, w, x, y, rows, cols);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return cuda_status(static_cast<int>(e), what);
}

}  // namespace

Status gemv_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 CUstream_st* stream) {
  return launch_rows(gemv_bf16_kernel, w, x, y, rows, cols, stream, "gemv_bf16 launch");
}

Status gemv_bf16_swiglu(const uint16_t* w_gate_up, const float* x, float* act, int64_t intermediate,
                        int64_t cols, CUstream_st* stream) {
  return launch_rows(gemv_bf16_swiglu_kernel, w_gate_up, x, act, intermediate, cols, stream,
                     "gemv_bf16_swiglu launch");
}

}  // namespace rlt::cuda
