// The row reductions of the model kernels, shared by the standalone norm kernels
// (model_kernels.cu) and the GEMV that opens a sublayer with its residual and norm
// (gemv_bf16.cu): both must round identically, so both take the arithmetic from here. Every
// function runs on a whole block of kRowThreads threads; thread t takes elements t, t + 256, ...
#pragma once

#include <cstdint>

namespace rlt::cuda {

constexpr int kRowThreads = 256;

// Sum over the block in a fixed tree (warp butterflies, then warp totals in order).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_totals[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kRowThreads / 32; ++w) total += warp_totals[w];
  __syncthreads();  // warp_totals may be reused by the caller's next reduction
  return total;
}

// RMSNorm's scale for one row: 1 / sqrt(mean(v²) + eps), v read through load(i).
template <typename Load>
__device__ __forceinline__ float rms_scale(Load load, int64_t n, float eps) {
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
    const float v = load(i);
    squares = fmaf(v, v, squares);
  }
  return 1.0f / sqrtf(block_sum(squares) / static_cast<float>(n) + eps);
}

// A sandwich-norm sublayer's end and the next one's start, for one row: the residual
// h' = h + RMSNorm(x) ⊙ w (one FMA per element), then y = RMSNorm(h') ⊙ next_w. h' goes to
// store_h(i, v) and is read back through load_h(i) by the thread that stored it; y goes to
// store_y(i, v). Explicit roundings, so that every caller gets the same bits.
template <typename StoreH, typename LoadH, typename StoreY>
__device__ __forceinline__ void sandwich_residual_then_norm(const float* x, const float* w,
                                                            const float* h, const float* next_w,
                                                            int64_t n, float eps, StoreH store_h,
                                                            LoadH load_h, StoreY store_y) {
  const float scale = rms_scale([&](int64_t i) { return x[i]; }, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads)
    store_h(i, __fmaf_rn(w[i], __fmul_rn(x[i], scale), h[i]));
  const float scale2 = rms_scale(load_h, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads)
    store_y(i, __fmul_rn(next_w[i], __fmul_rn(load_h(i), scale2)));
}

}  // namespace rlt::cuda
