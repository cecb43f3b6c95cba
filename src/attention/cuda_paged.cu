// cuda_paged kernels: flash-decoding over paged K/V (sm_80+), and an f32 tiled kernel for packed
// prefill sequences that the tensor-core kernel (cuda_paged_prefill_tc.cu) does not take.
//
// Decode: one block of 128 threads per (query row, group of 1/2/4 query heads sharing a KV head,
// key partition). A key's head_dim elements are spread over consecutive lanes, 8 each (one
// 16-byte load for 16-bit K/V; the lane count is the power of two that covers head_dim / 8, extra
// lanes idle); the block's lane groups take keys round-robin, several at a time so that many
// loads per thread are in flight, and keep their own online-softmax state per head. Groups merge
// through shared memory in a fixed order; rows with several partitions are merged by a second
// kernel, again in partition order. Every decision depends on the row's own length and the
// model's shape only, so a row's output is the same in any batch, and the grid depends on shapes
// only (CUDA-graph safe).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <string>

#include "attention/cuda_paged_kernels.h"
#include "attention/cuda_paged_plan.h"
#include "cuda/device.h"
#include "cuda/launch.cuh"

namespace rlt::attention::cuda_paged {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

template <ElementType E>
struct Load8;

template <>
struct Load8<ElementType::kF32> {
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
struct Load8<ElementType::kBF16> {
  __device__ static void run(const void* base, int64_t offset, float (&x)[8]) {
    const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + offset);
    widen_bf16(w.x, x[0], x[1]);
    widen_bf16(w.y, x[2], x[3]);
    widen_bf16(w.z, x[4], x[5]);
    widen_bf16(w.w, x[6], x[7]);
  }
};

template <>
struct Load8<ElementType::kF16> {
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

// The row of decode unit `unit`; false when the unit has none (a packed sequence with fewer rows,
// or one long enough for the prefill kernel).
__device__ __forceinline__ bool unit_row(const PagedLaunch& p, int64_t unit, int64_t& row,
                                         RowInfo& r) {
  if (!p.by_sequence) {
    row = unit;
    r = locate_row(p, row);
    return true;
  }
  const auto seq = static_cast<int32_t>(unit / kMaxDecodeRows);
  const auto j = static_cast<int32_t>(unit % kMaxDecodeRows);
  const int32_t begin = p.cu_seqlens_q[seq], n = p.cu_seqlens_q[seq + 1] - begin;
  if (n > kMaxDecodeRows || j >= n) return false;
  row = begin + j;
  r = {seq, p.context_lengths[seq] - n + j + 1};
  return true;
}

// kHeads query heads of one KV group per block: each key's K and V are loaded once for all of
// them (GQA), with an online-softmax state per head.
template <ElementType E, int kLanesPerKey, int kHeads>
__global__ void __launch_bounds__(kThreads) partition_kernel(PagedLaunch p, int64_t unit_begin) {
  ::rlt::cuda::wait_for_upstream_kernels();
  constexpr int kMaxHeadDim = kLanesPerKey * 8;
  constexpr int kGroups = kThreads / kLanesPerKey;
  constexpr int kKeysInFlight = kHeads >= 4 ? 2 : kUnroll;  // bounds registers with many heads
  __shared__ float group_acc[kGroups][kHeads][kMaxHeadDim];
  __shared__ float group_max[kGroups][kHeads], group_sum[kGroups][kHeads],
      group_weight[kGroups][kHeads];
  __shared__ float head_max[kHeads], head_sum[kHeads];

  const int64_t unit = unit_begin + blockIdx.x;
  const int32_t head0 = blockIdx.y * kHeads, part = blockIdx.z;
  int64_t row;
  RowInfo r;
  if (!unit_row(p, unit, row, r)) return;  // uniform over the block
  const int32_t size = partition_tokens(r.visible);
  const int32_t parts = (r.visible + size - 1) / size;
  if (part >= parts) return;  // uniform over the block
  const int32_t t_begin = part * size, t_end = min(r.visible, t_begin + size);

  const int head_dim = p.head_dim;
  const int lane = threadIdx.x % kLanesPerKey, group = threadIdx.x / kLanesPerKey;
  const bool active = lane * 8 < head_dim;  // lanes past head_dim load zeros
  const int32_t kv_head = head0 / (p.num_q_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(r.seq) * p.table_width;
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  const int64_t k_head = kv_head * p.k_head_stride + lane * 8,
                v_head = kv_head * p.v_head_stride + lane * 8;

  float q[kHeads][8], acc[kHeads][8], running_max[kHeads], running_sum[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[h][i] = acc[h][i] = 0.0f;
    if (active)
      Load8<ElementType::kF32>::run(p.q, (row * p.num_q_heads + head0 + h) * head_dim + lane * 8,
                                    q[h]);
    running_max[h] = -CUDART_INF_F;
    running_sum[h] = 0.0f;
  }

  // Every thread runs the same trip count (shuffles need whole warps); keys past the partition
  // are loaded as zeros and skipped.
  for (int32_t base = t_begin; base < t_end; base += kGroups * kKeysInFlight) {
    float kx[kKeysInFlight][8], vx[kKeysInFlight][8];
#pragma unroll
    for (int u = 0; u < kKeysInFlight; ++u) {
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
    for (int u = 0; u < kKeysInFlight; ++u) {
      const bool in_partition = base + u * kGroups + group < t_end;
#pragma unroll
      for (int h = 0; h < kHeads; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(q[h][i], kx[u][i], dot);
          // Butterfly: every lane of the key ends with the bit-identical total.
#pragma unroll
        for (int offset = kLanesPerKey / 2; offset > 0; offset /= 2)
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        if (in_partition) {
          const float score = dot * scale;
          const float new_max = fmaxf(running_max[h], score);
          const float correction = expf(running_max[h] - new_max), weight = expf(score - new_max);
          running_sum[h] = running_sum[h] * correction + weight;
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[h][i] = fmaf(weight, vx[u][i], acc[h][i] * correction);
          running_max[h] = new_max;
        }
      }
    }
  }

  // Merge the lane groups per head, in group order.
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
#pragma unroll
    for (int i = 0; i < 8; ++i) group_acc[group][h][lane * 8 + i] = acc[h][i];
    if (lane == 0) {
      group_max[group][h] = running_max[h];
      group_sum[group][h] = running_sum[h];
    }
  }
  __syncthreads();
  if (threadIdx.x < kHeads) {
    float m = -CUDART_INF_F;
    for (int g = 0; g < kGroups; ++g) m = fmaxf(m, group_max[g][threadIdx.x]);
    head_max[threadIdx.x] = m;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < kGroups * kHeads; idx += kThreads) {
    const int g = idx / kHeads, h = idx % kHeads;
    const float m = group_max[g][h];
    group_weight[g][h] = m == -CUDART_INF_F ? 0.0f : expf(m - head_max[h]);
  }
  __syncthreads();
  if (threadIdx.x < kHeads) {
    float sum = 0.0f;
    for (int g = 0; g < kGroups; ++g)
      sum += group_weight[g][threadIdx.x] * group_sum[g][threadIdx.x];
    head_sum[threadIdx.x] = sum;
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < kHeads * head_dim; idx += kThreads) {
    const int h = idx / head_dim, i = idx % head_dim;
    float o = 0.0f;
    for (int g = 0; g < kGroups; ++g) o = fmaf(group_weight[g][h], group_acc[g][h][i], o);
    const int64_t head = head0 + h;
    if (parts == 1) {
      p.out[(row * p.num_q_heads + head) * head_dim + i] = o / head_sum[h];
    } else {
      const int64_t state = ((unit - unit_begin) * p.num_q_heads + head) * p.max_partitions + part;
      p.partial_acc[state * head_dim + i] = o;
    }
  }
  if (parts > 1 && threadIdx.x < kHeads) {
    const int64_t state =
        ((unit - unit_begin) * p.num_q_heads + head0 + threadIdx.x) * p.max_partitions + part;
    p.partial_ml[state * 2] = head_max[threadIdx.x];
    p.partial_ml[state * 2 + 1] = head_sum[threadIdx.x];
  }
}

// Merges the partitions of split rows (log-sum-exp, in partition order).
__global__ void __launch_bounds__(kThreads) merge_kernel(PagedLaunch p, int64_t unit_begin) {
  ::rlt::cuda::wait_for_upstream_kernels();
  __shared__ float weight[kMaxPartitions];
  const int64_t unit = unit_begin + blockIdx.x;
  const int32_t head = blockIdx.y;
  int64_t row;
  RowInfo r;
  if (!unit_row(p, unit, row, r)) return;
  const int32_t parts = num_partitions(r.visible);
  if (parts <= 1) return;
  const int64_t first = ((unit - unit_begin) * p.num_q_heads + head) * p.max_partitions;
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

// Tiled prefill for sequences of several query rows: one 256-thread block per (sequence, tile of
// 16 query rows, query head). Key tiles of 32 go through shared memory (widened to f32) and serve
// all 16 rows; scores, the causal mask and an online softmax per row, then P·V into registers
// (thread = row · 16 + lane, dims lane + 16k). CUDA cores; a tensor-core version is future work.
constexpr int kQTile = 16, kKTile = 32, kPrefillThreads = 256;

__host__ __device__ inline size_t prefill_smem_floats(int d) {
  const int ds = d + 1;  // padded rows: the score loop reads K rows lane by lane without conflicts
  return static_cast<size_t>(kQTile * ds + kKTile * ds + kKTile * d + kQTile * (kKTile + 1) +
                             3 * kQTile);
}

template <ElementType E>
__device__ __forceinline__ float load1(const void* base, int64_t offset) {
  if constexpr (E == ElementType::kF32) return static_cast<const float*>(base)[offset];
  const uint16_t bits = static_cast<const uint16_t*>(base)[offset];
  if constexpr (E == ElementType::kBF16) return __uint_as_float(static_cast<uint32_t>(bits) << 16);
  return __half2float(__ushort_as_half(bits));
}

template <ElementType E>
__global__ void __launch_bounds__(kPrefillThreads) prefill_kernel(PagedLaunch p) {
  ::rlt::cuda::wait_for_upstream_kernels();
  extern __shared__ float smem[];
  const int d = p.head_dim, ds = d + 1;
  float* q_s = smem;               // [kQTile][ds]
  float* k_s = q_s + kQTile * ds;  // [kKTile][ds]
  float* v_s = k_s + kKTile * ds;  // [kKTile][d]
  float* p_s = v_s + kKTile * d;   // [kQTile][kKTile + 1]
  float* corr_s = p_s + kQTile * (kKTile + 1);
  float* max_s = corr_s + kQTile;
  float* sum_s = max_s + kQTile;

  const int seq = blockIdx.x, head = blockIdx.z;
  const int begin = p.cu_seqlens_q[seq], n = p.cu_seqlens_q[seq + 1] - begin;
  const int q0 = blockIdx.y * kQTile;
  if (n <= kMaxDecodeRows || q0 >= n) return;  // uniform over the block
  const int q_rows = min(kQTile, n - q0);
  const int first_pos = p.context_lengths[seq] - n;  // position of the sequence's first query row
  const int keys_end = first_pos + q0 + q_rows;      // keys the tile's last row sees
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.table_width;
  const float scale = 1.0f / sqrtf(static_cast<float>(d));

  for (int idx = threadIdx.x; idx < kQTile * d; idx += kPrefillThreads) {
    const int r = idx / d, c = idx % d;
    q_s[r * ds + c] =
        r < q_rows ? p.q[(static_cast<int64_t>(begin + q0 + r) * p.num_q_heads + head) * d + c]
                   : 0.0f;
  }
  if (threadIdx.x < kQTile) {
    max_s[threadIdx.x] = -CUDART_INF_F;
    sum_s[threadIdx.x] = 0.0f;
  }
  const int my_row = threadIdx.x / 16, lane = threadIdx.x % 16;
  float acc[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) acc[k] = 0.0f;

  for (int k0 = 0; k0 < keys_end; k0 += kKTile) {
    __syncthreads();  // the previous tile's K, V and P are no longer read
    for (int idx = threadIdx.x; idx < kKTile * d; idx += kPrefillThreads) {
      const int r = idx / d, c = idx % d, key = k0 + r;
      float kv = 0.0f, vv = 0.0f;
      if (key < keys_end) {
        const int64_t block = table[key / p.block_size], slot = key % p.block_size;
        kv = load1<E>(p.k, block * p.k_block_stride + slot * p.k_token_stride +
                               kv_head * p.k_head_stride + c);
        vv = load1<E>(p.v, block * p.v_block_stride + slot * p.v_token_stride +
                               kv_head * p.v_head_stride + c);
      }
      k_s[r * ds + c] = kv;
      v_s[r * d + c] = vv;
    }
    __syncthreads();
    // Scores: 16 x 32 pairs, two per thread; a warp shares one query row.
    for (int idx = threadIdx.x; idx < kQTile * kKTile; idx += kPrefillThreads) {
      const int i = idx / kKTile, j = idx % kKTile, key = k0 + j;
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot = fmaf(q_s[i * ds + c], k_s[j * ds + c], dot);
      const bool visible = i < q_rows && key <= first_pos + q0 + i;
      p_s[i * (kKTile + 1) + j] = visible ? dot * scale : -CUDART_INF_F;
    }
    __syncthreads();
    // Online softmax: warp w updates rows 2w and 2w + 1, one key per lane.
    const int warp = threadIdx.x / 32, key_lane = threadIdx.x % 32;
    for (int i = warp * 2; i < warp * 2 + 2; ++i) {
      const float s = p_s[i * (kKTile + 1) + key_lane];
      float tile_max = s;
      for (int o = 16; o > 0; o /= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      const float old_max = max_s[i], new_max = fmaxf(old_max, tile_max);
      const bool any = new_max != -CUDART_INF_F;
      const float pexp = (any && s != -CUDART_INF_F) ? expf(s - new_max) : 0.0f;
      float tile_sum = pexp;
      for (int o = 16; o > 0; o /= 2) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, o);
      __syncwarp();
      p_s[i * (kKTile + 1) + key_lane] = pexp;
      if (key_lane == 0) {
        const float corr =
            (any && old_max != -CUDART_INF_F) ? expf(old_max - new_max) : (any ? 0.0f : 1.0f);
        corr_s[i] = corr;
        sum_s[i] = sum_s[i] * corr + tile_sum;
        max_s[i] = new_max;
      }
    }
    __syncthreads();
    const float corr = corr_s[my_row];
#pragma unroll
    for (int k = 0; k < 16; ++k) acc[k] *= corr;
    for (int j = 0; j < kKTile; ++j) {
      const float pj = p_s[my_row * (kKTile + 1) + j];
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const int c = lane + 16 * k;
        if (c < d) acc[k] = fmaf(pj, v_s[j * d + c], acc[k]);
      }
    }
  }
  __syncthreads();
  if (my_row < q_rows) {
    const float inv = 1.0f / sum_s[my_row];
    float* out = p.out + (static_cast<int64_t>(begin + q0 + my_row) * p.num_q_heads + head) * d;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const int c = lane + 16 * k;
      if (c < d) out[c] = acc[k] * inv;
    }
  }
}

template <ElementType E>
cudaError_t launch_prefill(const PagedLaunch& p, cudaStream_t stream) {
  const size_t bytes = prefill_smem_floats(p.head_dim) * sizeof(float);
  const cudaError_t e = cudaFuncSetAttribute(
      prefill_kernel<E>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>((p.max_seqlen_q + kQTile - 1) / kQTile),
                  static_cast<unsigned>(p.num_q_heads));
  return ::rlt::cuda::launch(prefill_kernel<E>, grid, kPrefillThreads, bytes, stream, p);
}

template <ElementType E, int kLanesPerKey, int kHeads>
cudaError_t launch_heads(const PagedLaunch& p, int64_t unit_begin, int64_t units,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(units), static_cast<unsigned>(p.num_q_heads / kHeads),
                  static_cast<unsigned>(p.max_partitions));
  return ::rlt::cuda::launch(partition_kernel<E, kLanesPerKey, kHeads>, grid, kThreads, 0, stream,
                             p, unit_begin);
}

// Query heads per block: the largest of 4, 2, 1 that divides the GQA ratio (a function of the
// model, so a row's arithmetic never depends on the batch).
template <ElementType E, int kLanesPerKey>
cudaError_t launch_partitions(const PagedLaunch& p, int64_t unit_begin, int64_t units,
                              cudaStream_t stream) {
  const int32_t ratio = p.num_q_heads / p.num_kv_heads;
  if (ratio % 4 == 0) return launch_heads<E, kLanesPerKey, 4>(p, unit_begin, units, stream);
  if (ratio % 2 == 0) return launch_heads<E, kLanesPerKey, 2>(p, unit_begin, units, stream);
  return launch_heads<E, kLanesPerKey, 1>(p, unit_begin, units, stream);
}

template <ElementType E>
cudaError_t launch_for_dtype(const PagedLaunch& p, int64_t row_begin, int64_t rows,
                             cudaStream_t stream) {
  const int lanes = p.head_dim / 8;
  if (lanes <= 1) return launch_partitions<E, 1>(p, row_begin, rows, stream);
  if (lanes <= 2) return launch_partitions<E, 2>(p, row_begin, rows, stream);
  if (lanes <= 4) return launch_partitions<E, 4>(p, row_begin, rows, stream);
  if (lanes <= 8) return launch_partitions<E, 8>(p, row_begin, rows, stream);
  if (lanes <= 16) return launch_partitions<E, 16>(p, row_begin, rows, stream);
  return launch_partitions<E, 32>(p, row_begin, rows, stream);
}

// Launch errors are reported as this call's own: the runtime's last error is cleared so that an
// unrelated earlier error is neither blamed here nor left behind.
Status launch_status(cudaError_t e, const char* what) {
  if (e != cudaSuccess) (void)cudaGetLastError();
  return ::rlt::cuda::cuda_status(static_cast<int>(e), what);
}

}  // namespace

Status launch_paged_attention(const PagedLaunch& p, CUstream_st* stream) {
  if (!head_dim_supported(p.head_dim)) {
    return invalid_argument("cuda_paged: head_dim " + std::to_string(p.head_dim) +
                            " is not a multiple of 8 in [8, 256]");
  }
  for (int64_t begin = 0; begin < p.units; begin += p.rows_per_launch) {
    const int64_t rows = p.units - begin < p.rows_per_launch ? p.units - begin : p.rows_per_launch;
    cudaError_t e = cudaSuccess;
    switch (p.kv_element) {
      case ElementType::kF32:
        e = launch_for_dtype<ElementType::kF32>(p, begin, rows, stream);
        break;
      case ElementType::kBF16:
        e = launch_for_dtype<ElementType::kBF16>(p, begin, rows, stream);
        break;
      case ElementType::kF16:
        e = launch_for_dtype<ElementType::kF16>(p, begin, rows, stream);
        break;
    }
    RLT_RETURN_IF_ERROR(launch_status(e, "cuda_paged decode launch"));
    if (p.max_partitions > 1) {
      RLT_RETURN_IF_ERROR(launch_status(
          ::rlt::cuda::launch(
              merge_kernel, dim3(static_cast<unsigned>(rows), static_cast<unsigned>(p.num_q_heads)),
              kThreads, 0, stream, p, begin),
          "cuda_paged merge launch"));
    }
  }
  if (p.by_sequence && p.max_seqlen_q > kMaxDecodeRows) {
    if (tensor_core_prefill_supported(p.kv_element, p.head_dim)) {
      return launch_tensor_core_prefill(p, stream);
    }
    cudaError_t e = cudaSuccess;
    switch (p.kv_element) {
      case ElementType::kF32:
        e = launch_prefill<ElementType::kF32>(p, stream);
        break;
      case ElementType::kBF16:
        e = launch_prefill<ElementType::kBF16>(p, stream);
        break;
      case ElementType::kF16:
        e = launch_prefill<ElementType::kF16>(p, stream);
        break;
    }
    RLT_RETURN_IF_ERROR(launch_status(e, "cuda_paged prefill launch"));
  }
  return {};
}

}  // namespace rlt::attention::cuda_paged
