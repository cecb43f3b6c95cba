// cuda_paged kernels: flash-decoding over paged K/V (sm_80+).
//
// One block of 128 threads per (query row, query head, key partition). A key's head_dim
// elements are spread over consecutive lanes, 8 each (one 16-byte load for 16-bit K/V; the lane
// count is the power of two that covers head_dim / 8, extra lanes idle); the block's lane groups
// take keys round-robin, four at a time so that eight loads per thread are in flight, and keep
// their own online-softmax state. Groups merge through shared memory in a fixed order; rows with
// several partitions are merged by a second kernel, again in partition order. Every decision
// depends on the row's own length only, so a row's output is the same in any batch, and the grid
// depends on shapes only (CUDA-graph safe).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <string>

#include "attention/cuda_paged_kernels.h"
#include "attention/cuda_paged_plan.h"
#include "cuda/device.h"

namespace rlt::attention::cuda_paged {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

template <KVElement E>
struct Load8;

template <>
struct Load8<KVElement::kF32> {
  __device__ static void run(const void* base, int64_t offset, float (&x)[8]) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + offset);
    const float4 a = p[0], b = p[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  }
};

__device__ __forceinline__ void widen_bf16(uint32_t w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}

__device__ __forceinline__ void widen_f16(uint32_t w, float& lo, float& hi) {
  lo = __half2float(__ushort_as_half(static_cast<unsigned short>(w & 0xffffu)));
  hi = __half2float(__ushort_as_half(static_cast<unsigned short>(w >> 16)));
}

template <>
struct Load8<KVElement::kBF16> {
  __device__ static void run(const void* base, int64_t offset, float (&x)[8]) {
    const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + offset);
    widen_bf16(w.x, x[0], x[1]);
    widen_bf16(w.y, x[2], x[3]);
    widen_bf16(w.z, x[4], x[5]);
    widen_bf16(w.w, x[6], x[7]);
  }
};

template <>
struct Load8<KVElement::kF16> {
  __device__ static void run(const void* base, int64_t offset, float (&x)[8]) {
    const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + offset);
    widen_f16(w.x, x[0], x[1]);
    widen_f16(w.y, x[2], x[3]);
    widen_f16(w.z, x[4], x[5]);
    widen_f16(w.w, x[6], x[7]);
  }
};

struct RowInfo {
  int32_t seq;
  int32_t visible;  // keys this row attends to (bottom-right causal)
};

__device__ __forceinline__ RowInfo locate_row(const PagedLaunch& p, int64_t row) {
  int32_t seq = static_cast<int32_t>(row);
  int64_t begin = row, end = row + 1;
  if (p.cu_seqlens_q != nullptr) {
    int32_t lo = 0, hi = p.num_seqs - 1;  // the last sequence starting at or before `row`
    while (lo < hi) {
      const int32_t mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens_q[mid] <= row)
        lo = mid;
      else
        hi = mid - 1;
    }
    seq = lo;
    begin = p.cu_seqlens_q[seq];
    end = p.cu_seqlens_q[seq + 1];
  }
  const int32_t len = p.context_lengths[seq];
  return {seq, static_cast<int32_t>(len - (end - begin) + (row - begin) + 1)};
}

template <KVElement E, int kLanesPerKey>
__global__ void __launch_bounds__(kThreads) partition_kernel(PagedLaunch p, int64_t row_begin) {
  constexpr int kMaxHeadDim = kLanesPerKey * 8;
  constexpr int kGroups = kThreads / kLanesPerKey;
  __shared__ float group_acc[kGroups][kMaxHeadDim];
  __shared__ float group_max[kGroups], group_sum[kGroups], group_weight[kGroups];

  const int64_t row = row_begin + blockIdx.x;
  const int32_t head = blockIdx.y, part = blockIdx.z;
  const RowInfo r = locate_row(p, row);
  const int32_t size = partition_tokens(r.visible);
  const int32_t parts = (r.visible + size - 1) / size;
  if (part >= parts) return;  // uniform over the block
  const int32_t t_begin = part * size, t_end = min(r.visible, t_begin + size);

  const int head_dim = p.head_dim;
  const int lane = threadIdx.x % kLanesPerKey, group = threadIdx.x / kLanesPerKey;
  const bool active = lane * 8 < head_dim;  // lanes past head_dim load zeros
  const int32_t kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(r.seq) * p.table_width;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  const int64_t k_head = kv_head * p.k_head_stride + lane * 8,
                v_head = kv_head * p.v_head_stride + lane * 8;

  float q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (active)
    Load8<KVElement::kF32>::run(p.q, (row * p.num_q_heads + head) * head_dim + lane * 8, q);
  float running_max = -CUDART_INF_F, running_sum = 0.0f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  // Every thread runs the same trip count (shuffles need whole warps); keys past the partition
  // are loaded as zeros and skipped.
  for (int32_t base = t_begin; base < t_end; base += kGroups * kUnroll) {
    float kx[kUnroll][8], vx[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int32_t t = base + u * kGroups + group;
      if (t < t_end && active) {
        const int64_t block = table[t / p.block_size], slot = t % p.block_size;
        Load8<E>::run(p.k, block * p.k_block_stride + slot * p.k_token_stride + k_head, kx[u]);
        Load8<E>::run(p.v, block * p.v_block_stride + slot * p.v_token_stride + v_head, vx[u]);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) kx[u][i] = vx[u][i] = 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) dot = fmaf(q[i], kx[u][i], dot);
        // Butterfly: every lane of the key ends with the bit-identical total.
#pragma unroll
      for (int offset = kLanesPerKey / 2; offset > 0; offset /= 2)
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      if (base + u * kGroups + group < t_end) {
        const float score = dot * scale;
        const float new_max = fmaxf(running_max, score);
        const float correction = expf(running_max - new_max), weight = expf(score - new_max);
        running_sum = running_sum * correction + weight;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = fmaf(weight, vx[u][i], acc[i] * correction);
        running_max = new_max;
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 8; ++i) group_acc[group][lane * 8 + i] = acc[i];
  if (lane == 0) {
    group_max[group] = running_max;
    group_sum[group] = running_sum;
  }
  __syncthreads();
  float block_max = -CUDART_INF_F;
  for (int g = 0; g < kGroups; ++g) block_max = fmaxf(block_max, group_max[g]);
  if (threadIdx.x < kGroups) {
    const float m = group_max[threadIdx.x];
    group_weight[threadIdx.x] = m == -CUDART_INF_F ? 0.0f : expf(m - block_max);
  }
  __syncthreads();
  float block_sum = 0.0f;
  for (int g = 0; g < kGroups; ++g) block_sum += group_weight[g] * group_sum[g];

  const int64_t out_index = (row * p.num_q_heads + head) * head_dim;
  const int64_t state = ((row - row_begin) * p.num_q_heads + head) * p.max_partitions + part;
  for (int i = threadIdx.x; i < head_dim; i += kThreads) {
    float o = 0.0f;
    for (int g = 0; g < kGroups; ++g) o = fmaf(group_weight[g], group_acc[g][i], o);
    if (parts == 1)
      p.out[out_index + i] = o / block_sum;
    else
      p.partial_acc[state * head_dim + i] = o;
  }
  if (parts > 1 && threadIdx.x == 0) {
    p.partial_ml[state * 2] = block_max;
    p.partial_ml[state * 2 + 1] = block_sum;
  }
}

// Merges the partitions of split rows (log-sum-exp, in partition order).
__global__ void __launch_bounds__(kThreads) merge_kernel(PagedLaunch p, int64_t row_begin) {
  __shared__ float weight[kMaxPartitions];
  const int64_t row = row_begin + blockIdx.x;
  const int32_t head = blockIdx.y;
  const int32_t parts = num_partitions(locate_row(p, row).visible);
  if (parts <= 1) return;
  const int64_t first = ((row - row_begin) * p.num_q_heads + head) * p.max_partitions;
  float m = -CUDART_INF_F;
  for (int k = 0; k < parts; ++k) m = fmaxf(m, p.partial_ml[(first + k) * 2]);
  if (threadIdx.x < parts) weight[threadIdx.x] = expf(p.partial_ml[(first + threadIdx.x) * 2] - m);
  __syncthreads();
  float sum = 0.0f;
  for (int k = 0; k < parts; ++k) sum += weight[k] * p.partial_ml[(first + k) * 2 + 1];
  const int d = p.head_dim;
  for (int i = threadIdx.x; i < d; i += kThreads) {
    float o = 0.0f;
    for (int k = 0; k < parts; ++k) o = fmaf(weight[k], p.partial_acc[(first + k) * d + i], o);
    p.out[(row * p.num_q_heads + head) * d + i] = o / sum;
  }
}

template <KVElement E, int kLanesPerKey>
void launch_partitions(const PagedLaunch& p, int64_t row_begin, int64_t rows, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(p.num_q_heads),
                  static_cast<unsigned>(p.max_partitions));
  partition_kernel<E, kLanesPerKey><<<grid, kThreads, 0, stream>>>(p, row_begin);
}

template <KVElement E>
void launch_for_dtype(const PagedLaunch& p, int64_t row_begin, int64_t rows, cudaStream_t stream) {
  const int lanes = p.head_dim / 8;
  if (lanes <= 1)
    launch_partitions<E, 1>(p, row_begin, rows, stream);
  else if (lanes <= 2)
    launch_partitions<E, 2>(p, row_begin, rows, stream);
  else if (lanes <= 4)
    launch_partitions<E, 4>(p, row_begin, rows, stream);
  else if (lanes <= 8)
    launch_partitions<E, 8>(p, row_begin, rows, stream);
  else if (lanes <= 16)
    launch_partitions<E, 16>(p, row_begin, rows, stream);
  else
    launch_partitions<E, 32>(p, row_begin, rows, stream);
}

}  // namespace

Status launch_paged_attention(const PagedLaunch& p, CUstream_st* stream) {
  if (!head_dim_supported(p.head_dim)) {
    return invalid_argument("cuda_paged: head_dim " + std::to_string(p.head_dim) +
                            " is not a multiple of 8 in [8, 256]");
  }
  for (int64_t begin = 0; begin < p.rows; begin += p.rows_per_launch) {
    const int64_t rows = p.rows - begin < p.rows_per_launch ? p.rows - begin : p.rows_per_launch;
    switch (p.kv_element) {
      case KVElement::kF32:
        launch_for_dtype<KVElement::kF32>(p, begin, rows, stream);
        break;
      case KVElement::kBF16:
        launch_for_dtype<KVElement::kBF16>(p, begin, rows, stream);
        break;
      case KVElement::kF16:
        launch_for_dtype<KVElement::kF16>(p, begin, rows, stream);
        break;
    }
    if (p.max_partitions > 1) {
      merge_kernel<<<dim3(static_cast<unsigned>(rows), static_cast<unsigned>(p.num_q_heads)),
                     kThreads, 0, stream>>>(p, begin);
    }
    RLT_RETURN_IF_ERROR(
        ::rlt::cuda::cuda_status(static_cast<int>(cudaGetLastError()), "cuda_paged launch"));
  }
  return {};
}

}  // namespace rlt::attention::cuda_paged
