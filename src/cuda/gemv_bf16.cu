#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>

#include "cuda/device.h"
#include "cuda/gemv_bf16.h"
#include "cuda/launch.cuh"
#include "cuda/residual_norm.cuh"
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

// sum + the dot product of 8 bf16 weights with x[0..8), in a fixed order. x in global memory is
// read through the read-only cache; in shared memory (kSharedX), plainly.
template <bool kSharedX>
__device__ __forceinline__ float dot8(uint4 packed, const float* x, float sum) {
  float4 x0, x1;
  if constexpr (kSharedX) {
    x0 = *reinterpret_cast<const float4*>(x);
    x1 = *reinterpret_cast<const float4*>(x + 4);
  } else {
    x0 = __ldg(reinterpret_cast<const float4*>(x));
    x1 = __ldg(reinterpret_cast<const float4*>(x + 4));
  }
  sum += bf16_bits_to_float(packed.x & 0xffffu) * x0.x + bf16_bits_to_float(packed.x >> 16) * x0.y;
  sum += bf16_bits_to_float(packed.y & 0xffffu) * x0.z + bf16_bits_to_float(packed.y >> 16) * x0.w;
  sum += bf16_bits_to_float(packed.z & 0xffffu) * x1.x + bf16_bits_to_float(packed.z >> 16) * x1.y;
  sum += bf16_bits_to_float(packed.w & 0xffffu) * x1.z + bf16_bits_to_float(packed.w >> 16) * x1.w;
  return sum;
}

// One lane's walk over a weight row: lanes read 8 consecutive bf16 (16 bytes) per load and
// together cover 256 columns, kLoadsInFlight loads at a time, and a lane sums its products in
// column order (so the unrolled loop gives the same bits as one load at a time). Weights are read
// once: streamed past L1, which keeps x. The first step's loads may be issued before the kernel
// waits for its upstream kernels (prefetch()): weights never change, and with programmatic
// dependent launch they then arrive while the producer of x is still finishing.
struct RowWalk {
  const uint16_t* wr;
  int64_t cols;
  int lane;
  bool vector_ok;  // 16-byte loads; else 2-byte loads throughout
  uint4 first[kLoadsInFlight];
  bool has_first = false;

  __device__ RowWalk(const uint16_t* row, const float* x, int64_t columns, int lane_index)
      : wr(row), cols(columns), lane(lane_index) {
    vector_ok = (cols % 8 == 0) && (reinterpret_cast<uintptr_t>(wr) % 16 == 0) &&
                (reinterpret_cast<uintptr_t>(x) % 16 == 0);
  }

  __device__ __forceinline__ bool full_step(int64_t c) const {
    return c + (kLoadsInFlight - 1) * kWarpStep + 8 <= cols;
  }

  __device__ __forceinline__ void prefetch() {
    const int64_t c = static_cast<int64_t>(lane) * 8;
    if (!vector_ok || !full_step(c)) return;
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u)
      first[u] = __ldcs(reinterpret_cast<const uint4*>(wr + c + u * kWarpStep));
    has_first = true;
  }

  // This lane's share of the row's dot product with x.
  template <bool kSharedX>
  __device__ __forceinline__ float dot(const float* __restrict__ x) {
    float sum = 0.0f;
    if (!vector_ok) {
      for (int64_t c = lane; c < cols; c += kWarp) sum += bf16_bits_to_float(wr[c]) * x[c];
      return sum;
    }
    int64_t c = static_cast<int64_t>(lane) * 8;
    if (has_first) {
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        sum = dot8<kSharedX>(first[u], x + c + u * kWarpStep, sum);
      c += kLoadsInFlight * kWarpStep;
    }
    for (; full_step(c); c += kLoadsInFlight * kWarpStep) {
      uint4 packed[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        packed[u] = __ldcs(reinterpret_cast<const uint4*>(wr + c + u * kWarpStep));
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u)
        sum = dot8<kSharedX>(packed[u], x + c + u * kWarpStep, sum);
    }
    for (; c + 8 <= cols; c += kWarpStep)
      sum = dot8<kSharedX>(__ldcs(reinterpret_cast<const uint4*>(wr + c)), x + c, sum);
    return sum;
  }
};

// The warp's total, valid in lane 0.
__device__ __forceinline__ float warp_total(float sum) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  return sum;
}

__device__ __forceinline__ int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}

// One warp per output row.
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gemv_bf16_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                     float* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t row = warp_row();
  const int lane = threadIdx.x % kWarp;
  RowWalk walk(w + (row < rows ? row : 0) * cols, x, cols, lane);
  if (row < rows) walk.prefetch();
  wait_for_upstream_kernels();
  if (row >= rows) return;
  const float sum = warp_total(walk.dot<false>(x));
  if (lane == 0) y[row] = sum;
}

// One warp per activation: the gate row and the up row, each summed exactly as
// gemv_bf16_kernel sums it, then combined as silu_mul does.
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gemv_bf16_swiglu_kernel(const uint16_t* __restrict__ w, const float* __restrict__ x,
                            float* __restrict__ act, int64_t intermediate, int64_t cols) {
  const int64_t row = warp_row();
  const int lane = threadIdx.x % kWarp;
  const int64_t r = row < intermediate ? row : 0;
  RowWalk gate_walk(w + r * cols, x, cols, lane),
      up_walk(w + (intermediate + r) * cols, x, cols, lane);
  if (row < intermediate) gate_walk.prefetch();
  wait_for_upstream_kernels();
  if (row >= intermediate) return;
  const float gate = warp_total(gate_walk.dot<false>(x));
  const float up = warp_total(up_walk.dot<false>(x));
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

static_assert(kWarpsPerBlock * kWarp == kRowThreads,
              "the fused prologue reduces rows with the model kernels' block size");

// gemv_bf16_kernel (kSwiglu: gemv_bf16_swiglu_kernel) on x = RMSNorm(h') ⊙ next_w, where
// h' = h + RMSNorm(sublayer) ⊙ out_w: every block first computes h' and x for itself, exactly as
// add_rms_norm_then_norm does, into shared memory; the last block past that point writes h' back
// to h (all others have read h by then) and resets the counter for the next launch.
template <bool kSwiglu>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarp)
    gemv_bf16_residual_norm_kernel(const uint16_t* __restrict__ w, int64_t outputs, int64_t cols,
                                   ResidualNorm rn, float* __restrict__ y) {
  extern __shared__ __align__(16) float shared[];
  float* x = shared;             // [cols]: the next sublayer's normed input
  float* h_new = shared + cols;  // [cols]: the residual stream after this sublayer
  __shared__ bool last_block;
  const int64_t row = warp_row();
  const int lane = threadIdx.x % kWarp;
  const int64_t r = row < outputs ? row : 0;
  // Alignment is decided on the shared x, which is 16-byte aligned.
  RowWalk walk(w + r * cols, x, cols, lane);
  RowWalk up_walk(w + ((kSwiglu ? outputs : 0) + r) * cols, x, cols, lane);
  if (row < outputs) walk.prefetch();
  wait_for_upstream_kernels();
  sandwich_residual_then_norm(
      rn.sublayer, rn.out_norm, rn.h, rn.next_norm, cols, rn.eps,
      [&](int64_t i, float v) { h_new[i] = v; }, [&](int64_t i) { return h_new[i]; },
      [&](int64_t i, float v) { x[i] = v; });
  __syncthreads();  // x complete; this block's reads of h are done
  if (threadIdx.x == 0) {
    __threadfence();  // this block's reads of h are ordered before its count
    last_block = atomicAdd(rn.done_blocks, 1u) == gridDim.x - 1;
    if (last_block) __threadfence();  // every count (so every read of h) before the write-back
  }
  __syncthreads();
  if (last_block) {
    for (int64_t i = threadIdx.x; i < cols; i += kRowThreads) rn.h[i] = h_new[i];
    if (threadIdx.x == 0) *rn.done_blocks = 0;
  }
  if (row >= outputs) return;
  const float first = warp_total(walk.dot<true>(x));
  if constexpr (kSwiglu) {
    const float up = warp_total(up_walk.dot<true>(x));
    if (lane == 0) y[row] = swiglu(first, up);
  } else {
    if (lane == 0) y[row] = first;
  }
}

template <bool kSwiglu>
Status launch_residual_norm(const uint16_t* w, int64_t outputs, int64_t cols,
                            const ResidualNorm& rn, float* y, CUstream_st* stream,
                            const char* what) {
  if (outputs <= 0) return {};
  if (!gemv_residual_norm_supported(cols)) {
    return invalid_argument(fmt::format("{}: {} columns exceed the {} the fused norm holds", what,
                                        cols, kMaxResidualNormColumns));
  }
  const dim3 blocks(static_cast<unsigned>((outputs + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const size_t shared_bytes = static_cast<size_t>(2 * cols) * sizeof(float);
  // Past 48 KiB in all (the kernel has some static shared memory too) a block must opt in.
  if (shared_bytes > 46 * 1024) {
    const cudaError_t a = cudaFuncSetAttribute(gemv_bf16_residual_norm_kernel<kSwiglu>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(shared_bytes));
    if (a != cudaSuccess) {
      (void)cudaGetLastError();
      return cuda_status(static_cast<int>(a), what);
    }
  }
  const cudaError_t e =
      launch(gemv_bf16_residual_norm_kernel<kSwiglu>, blocks, kWarpsPerBlock * kWarp, shared_bytes,
             stream, w, outputs, cols, rn, y);
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

Status gemv_bf16_residual_norm(const uint16_t* w, int64_t rows, int64_t cols,
                               const ResidualNorm& rn, float* y, CUstream_st* stream) {
  return launch_residual_norm<false>(w, rows, cols, rn, y, stream,
                                     "gemv_bf16_residual_norm launch");
}

Status gemv_bf16_residual_norm_swiglu(const uint16_t* w_gate_up, int64_t intermediate, int64_t cols,
                                      const ResidualNorm& rn, float* act, CUstream_st* stream) {
  return launch_residual_norm<true>(w_gate_up, intermediate, cols, rn, act, stream,
                                    "gemv_bf16_residual_norm_swiglu launch");
}

}  // namespace rlt::cuda
