#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>

#include "cuda/device.h"
#include "cuda/launch.cuh"
#include "cuda/model_kernels.h"
#include "cuda/residual_norm.cuh"
#include "cuda/swiglu.cuh"

namespace rlt::cuda {
namespace {

Status launched(cudaError_t e, const char* what) {
  if (e != cudaSuccess) (void)cudaGetLastError();  // reported here, not again by a later check
  return cuda_status(static_cast<int>(e), what);
}

dim3 grid_for(int64_t n, int threads) {
  return dim3(static_cast<unsigned>((n + threads - 1) / threads));
}

// One block per row.
dim3 rows_grid(int64_t rows) {
  return dim3(static_cast<unsigned>(rows));
}

__device__ __forceinline__ float load_as_f32(const void* base, ElementType type, int64_t i) {
  switch (type) {
    case ElementType::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    case ElementType::kF16:
      return __half2float(static_cast<const __half*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}

__device__ __forceinline__ void store_from_f32(void* base, ElementType type, int64_t i, float v) {
  switch (type) {
    case ElementType::kBF16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
      break;
    case ElementType::kF16:
      static_cast<__half*>(base)[i] = __float2half_rn(v);
      break;
    default:
      static_cast<float*>(base)[i] = v;
  }
}

__global__ void embed_kernel(const void* table, ElementType type, int64_t hidden,
                             const int32_t* tokens, float* out) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  const int64_t base = static_cast<int64_t>(tokens[r]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
    out[r * hidden + i] = load_as_f32(table, type, base + i);
}

// mode 0: y = norm(x) ⊙ w; mode 1: h += norm(x) ⊙ w.
__global__ void __launch_bounds__(kRowThreads)
    norm_kernel(const float* x, const float* w, int64_t n, float eps, void* y, ElementType y_type,
                int mode) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  const float* xr = x + r * n;
  const float scale = rms_scale([&](int64_t i) { return xr[i]; }, n, eps);
  // Explicit roundings (the residual as one FMA, as the compiler contracted it before), which
  // residual_norm_kernel repeats exactly.
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads) {
    if (mode == 0) {
      store_from_f32(y, y_type, r * n + i, __fmul_rn(w[i], __fmul_rn(xr[i], scale)));
    } else {
      float* yr = static_cast<float*>(y) + r * n;
      yr[i] = __fmaf_rn(w[i], __fmul_rn(xr[i], scale), yr[i]);
    }
  }
}

// norm_kernel mode 1 on h, then norm_kernel mode 0 from h into y, in place. Each thread reads
// back only the h elements it wrote itself.
__global__ void __launch_bounds__(kRowThreads)
    residual_norm_kernel(const float* x, const float* w, float* h, const float* next_w, int64_t n,
                         float eps, void* y, ElementType y_type) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  float* hr = h + r * n;
  sandwich_residual_then_norm(
      x + r * n, w, hr, next_w, n, eps, [&](int64_t i, float v) { hr[i] = v; },
      [&](int64_t i) { return hr[i]; },
      [&](int64_t i, float v) { store_from_f32(y, y_type, r * n + i, v); });
}

__global__ void add_kernel(float* h, const float* x, int64_t n) {
  wait_for_upstream_kernels();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) h[i] += x[i];
}

// One block per row; threads take (head, pair) items of q and k, then K/V elements.
__global__ void rope_kv_kernel(RopeKvWrite a) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  const int32_t d = a.head_dim, half = d / 2;
  const int64_t q_dim = int64_t{a.num_heads} * d, kv_dim = int64_t{a.num_kv_heads} * d;
  const float* row = a.qkv + r * (q_dim + 2 * kv_dim);
  const float pos = static_cast<float>(a.positions[r]);
  const int64_t block = a.write_block[r], slot = a.write_slot[r];
  const int64_t slot_base = block * a.block_stride + slot * a.token_stride;
  const int64_t pairs = int64_t{a.num_heads + a.num_kv_heads} * half;
  for (int64_t item = threadIdx.x; item < pairs; item += blockDim.x) {
    const int64_t head = item / half;
    const int32_t i = static_cast<int32_t>(item % half);
    const float angle = pos * a.inv_freq[i];
    const float c = cosf(angle), s = sinf(angle);
    const float x0 = row[head * d + i], x1 = row[head * d + i + half];
    const float y0 = x0 * c - x1 * s, y1 = x1 * c + x0 * s;
    if (head < a.num_heads) {
      a.q_out[r * q_dim + head * d + i] = y0;
      a.q_out[r * q_dim + head * d + i + half] = y1;
    } else {
      const int64_t kh = head - a.num_heads;
      store_from_f32(a.k_cache, a.cache_type, slot_base + kh * a.head_stride + i, y0);
      store_from_f32(a.k_cache, a.cache_type, slot_base + kh * a.head_stride + i + half, y1);
    }
  }
  const float* v = row + q_dim + kv_dim;
  for (int64_t e = threadIdx.x; e < kv_dim; e += blockDim.x) {
    const int64_t kh = e / d, i = e % d;
    store_from_f32(a.v_cache, a.cache_type, slot_base + kh * a.head_stride + i, v[e]);
  }
}

__global__ void silu_mul_kernel(const float* gate_up, int64_t rows, int64_t inter, void* out,
                                ElementType out_type) {
  wait_for_upstream_kernels();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= rows * inter) return;
  const int64_t r = idx / inter, i = idx % inter;
  const float g = gate_up[r * 2 * inter + i], u = gate_up[r * 2 * inter + inter + i];
  store_from_f32(out, out_type, idx, swiglu(g, u));
}

__global__ void __launch_bounds__(kRowThreads)
    gate_kernel(const float* h, const float* w, float bias, int64_t n, float* out) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += kRowThreads) dot = fmaf(h[r * n + i], w[i], dot);
  const float total = block_sum(dot);
  if (threadIdx.x == 0) out[r] = total + bias;
}

__global__ void convert_kernel(const float* x, ElementType type, void* y, int64_t n) {
  wait_for_upstream_kernels();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) store_from_f32(y, type, i, x[i]);
}

__global__ void move_rows_kernel(const float* src, const int32_t* index, int64_t n, float* dst,
                                 bool gather) {
  wait_for_upstream_kernels();
  const int64_t r = blockIdx.x;
  const int64_t from = gather ? index[r] : r, to = gather ? r : index[r];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[to * n + i] = src[from * n + i];
}

}  // namespace

Status embed_rows(const void* table, ElementType type, int64_t hidden, const int32_t* tokens,
                  int64_t rows, float* out, CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(launch(embed_kernel, rows_grid(rows), kRowThreads, 0, stream, table, type, hidden,
                         tokens, out),
                  "embedding");
}

Status rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y,
                CUstream_st* stream) {
  if (rows <= 0) return {};
  return rms_norm_to(x, w, rows, n, eps, y, ElementType::kF32, stream);
}

Status rms_norm_to(const float* x, const float* w, int64_t rows, int64_t n, float eps, void* y,
                   ElementType y_type, CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(
      launch(norm_kernel, rows_grid(rows), kRowThreads, 0, stream, x, w, n, eps, y, y_type, 0),
      "rms_norm");
}

Status add_rms_norm(float* h, const float* x, const float* w, int64_t rows, int64_t n, float eps,
                    CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(launch(norm_kernel, rows_grid(rows), kRowThreads, 0, stream, x, w, n, eps, h,
                         ElementType::kF32, 1),
                  "add_rms_norm");
}

Status add_rms_norm_then_norm(float* h, const float* x, const float* w, const float* next_w,
                              int64_t rows, int64_t n, float eps, void* y, ElementType y_type,
                              CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(launch(residual_norm_kernel, rows_grid(rows), kRowThreads, 0, stream, x, w, h,
                         next_w, n, eps, y, y_type),
                  "add_rms_norm_then_norm");
}

Status add_in_place(float* h, const float* x, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  return launched(launch(add_kernel, grid_for(n, 256), 256, 0, stream, h, x, n), "residual add");
}

Status rope_and_write_kv(const RopeKvWrite& args, CUstream_st* stream) {
  if (args.rows <= 0) return {};
  if (args.head_dim % 2 != 0) return invalid_argument("rope: head_dim must be even");
  return launched(launch(rope_kv_kernel, rows_grid(args.rows), 128, 0, stream, args),
                  "rope + K/V write");
}

Status silu_mul(const float* gate_up, int64_t rows, int64_t intermediate, void* out,
                ElementType out_type, CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(launch(silu_mul_kernel, grid_for(rows * intermediate, 256), 256, 0, stream,
                         gate_up, rows, intermediate, out, out_type),
                  "silu_mul");
}

Status gate_logits(const float* h, const float* w, float bias, int64_t rows, int64_t n, float* out,
                   CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(launch(gate_kernel, rows_grid(rows), kRowThreads, 0, stream, h, w, bias, n, out),
                  "exit gate");
}

Status convert_from_f32(const float* x, ElementType type, void* y, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  return launched(launch(convert_kernel, grid_for(n, 256), 256, 0, stream, x, type, y, n),
                  "f32 conversion");
}

Result<bool> kernels_wait_for_upstream() {
  cudaFuncAttributes attributes{};
  const cudaError_t e = cudaFuncGetAttributes(&attributes, add_kernel);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_status(static_cast<int>(e), "reading the model kernels' attributes");
  }
  // __CUDA_ARCH__ of the code that runs is its PTX version x 10.
  return attributes.ptxVersion >= 90;
}

Status gather_rows(const float* src, const int32_t* index, int64_t rows, int64_t n, float* dst,
                   CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(
      launch(move_rows_kernel, rows_grid(rows), kRowThreads, 0, stream, src, index, n, dst, true),
      "gather rows");
}

Status scatter_rows(const float* src, const int32_t* index, int64_t rows, int64_t n, float* dst,
                    CUstream_st* stream) {
  if (rows <= 0) return {};
  return launched(
      launch(move_rows_kernel, rows_grid(rows), kRowThreads, 0, stream, src, index, n, dst, false),
      "scatter rows");
}

}  // namespace rlt::cuda
