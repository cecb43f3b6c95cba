// cuda_paged's tensor-core prefill: packed sequences of more than kMaxDecodeRows query rows with
// 16-bit K/V and head_dim 64 or 128, as in FlashAttention-2. A block of 4 warps takes 64 query
// rows of one (sequence, query head); each warp owns 16 rows and walks the visible keys in tiles
// of 64 gathered from the pages into shared memory. S = Q K^T and O += P V run on mma.sync
// m16n8k16 (16-bit operands, f32 accumulation); the online softmax stays in f32 registers.
//
// Precision: Q (f32 in the model) and P (f32 probabilities) are rounded to the K/V element type
// to enter the tensor cores, exactly as FlashAttention computes in a bf16/f16 model; K and V are
// used as stored. Everything else is f32. The error this adds is bounded in
// tools/tensor_core_prefill_error.py (the tolerance the GPU tests use).
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, t = lane % 4): A regs {row g, k 2t..2t+1},
// {row g+8, k 2t..}, {row g, k 2t+8..}, {row g+8, k 2t+8..}; B regs {k 2t..2t+1, n g},
// {k 2t+8.., n g}; C {row g, n 2t, 2t+1}, {row g+8, n 2t, 2t+1}. The S accumulators of two
// consecutive key groups of 8 are exactly the A fragment of P for 16 keys, so P never leaves
// registers. Fragments are read from shared memory with plain loads; row strides of D + 8
// elements keep every warp access free of bank conflicts.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/cuda_paged_kernels.h"
#include "attention/cuda_paged_plan.h"
#include "cuda/device.h"
#include "cuda/launch.cuh"

namespace rlt::attention::cuda_paged {
namespace {

constexpr int kRows = 64;  // query rows per block, 16 per warp
constexpr int kKeys = 64;  // keys per shared-memory tile
constexpr int kThreads = 128;
constexpr float kNegInf = -__builtin_huge_valf();

template <ElementType E>
__device__ __forceinline__ uint32_t to_bits(float x) {
  if constexpr (E == ElementType::kF16) {
    return __half_as_ushort(__float2half_rn(x));
  } else {
    // bf16, round to nearest even (finite values; a NaN stays a NaN).
    const uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  }
}

template <ElementType E>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  return to_bits<E>(lo) | (to_bits<E>(hi) << 16);
}

template <ElementType E>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (E == ElementType::kF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// One query row's running softmax state over the key tiles seen so far (log2 domain).
struct RowState {
  float max = kNegInf;
  float sum = 0.0f;  // this thread's share; the quad's shares add up at the end
};

// Masks, exponentiates and accumulates the scores of one row half (values x[j][e], keys
// key0 + 8j + e); returns the factor the row's earlier output must be scaled by.
template <int kGroups>
__device__ __forceinline__ float softmax_update(float (&x)[kGroups][2], int key0, int pos,
                                                bool valid, RowState& st) {
  float tile_max = kNegInf;
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      if (!valid || key0 + 8 * j + e > pos) x[j][e] = kNegInf;
      tile_max = fmaxf(tile_max, x[j][e]);
    }
  }
  tile_max = quad_max(tile_max);
  const float new_max = fmaxf(st.max, tile_max);
  // No visible key yet: nothing to rescale, and every probability so far is 0.
  const float base = new_max == kNegInf ? 0.0f : new_max;
  const float corr = st.max == kNegInf ? 0.0f : exp2f(st.max - base);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGroups; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      x[j][e] = x[j][e] == kNegInf ? 0.0f : exp2f(x[j][e] - base);
      sum += x[j][e];
    }
  }
  st.sum = st.sum * corr + sum;
  st.max = new_max;
  return corr;
}

template <ElementType E, int D>
__global__ void __launch_bounds__(kThreads) prefill_tc_kernel(PagedLaunch p) {
  ::rlt::cuda::wait_for_upstream_kernels();
  __shared__ __align__(16) uint16_t k_s[kKeys][D + 8];
  __shared__ __align__(16) uint16_t v_s[kKeys][D + 8];
  constexpr int kGroups = kKeys / 8;  // key groups of 8 (n-tiles of S)
  const int seq = blockIdx.x, head = blockIdx.z;
  const int begin = p.cu_seqlens_q[seq], n = p.cu_seqlens_q[seq + 1] - begin;
  const int q0 = blockIdx.y * kRows;
  if (n <= kMaxDecodeRows || q0 >= n) return;  // uniform over the block
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int first_pos = p.context_lengths[seq] - n;     // position of the sequence's first row
  const int keys_end = first_pos + min(q0 + kRows, n);  // keys the block's last row sees
  const int kv_head = head / (p.num_q_heads / p.num_kv_heads);
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.table_width;
  const auto* k_pool = static_cast<const uint16_t*>(p.k);
  const auto* v_pool = static_cast<const uint16_t*>(p.v);

  // This thread's two rows (g and g + 8 of the warp's 16), relative to the sequence.
  const int row_a = q0 + warp * 16 + g, row_b = row_a + 8;
  const bool valid_a = row_a < n, valid_b = row_b < n;
  const int pos_a = first_pos + row_a, pos_b = first_pos + row_b;
  // The warp's last row position: key tiles past it are skipped (uniform over the warp); a warp
  // whose rows all lie past the sequence skips every tile.
  const int warp_first_row = q0 + warp * 16;
  const int warp_last = warp_first_row < n ? first_pos + min(warp_first_row + 15, n - 1) : -1;

  // Q as A fragments, pre-scaled by log2(e) / sqrt(D) so that softmax uses exp2.
  const float scale = 1.4426950408889634f * rsqrtf(static_cast<float>(D));
  uint32_t qf[D / 16][4];
  {
    const float* qa = p.q + (static_cast<int64_t>(begin + row_a) * p.num_q_heads + head) * D;
    const float* qb = p.q + (static_cast<int64_t>(begin + row_b) * p.num_q_heads + head) * D;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      const int c0 = kc * 16 + 2 * t, c1 = c0 + 8;
      const float2 zero = make_float2(0.0f, 0.0f);
      const float2 a0 = valid_a ? *reinterpret_cast<const float2*>(qa + c0) : zero;
      const float2 b0 = valid_b ? *reinterpret_cast<const float2*>(qb + c0) : zero;
      const float2 a1 = valid_a ? *reinterpret_cast<const float2*>(qa + c1) : zero;
      const float2 b1 = valid_b ? *reinterpret_cast<const float2*>(qb + c1) : zero;
      qf[kc][0] = pack2<E>(a0.x * scale, a0.y * scale);
      qf[kc][1] = pack2<E>(b0.x * scale, b0.y * scale);
      qf[kc][2] = pack2<E>(a1.x * scale, a1.y * scale);
      qf[kc][3] = pack2<E>(b1.x * scale, b1.y * scale);
    }
  }
  float o[D / 8][4];
#pragma unroll
  for (int nd = 0; nd < D / 8; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
  RowState st_a, st_b;

  for (int k0 = 0; k0 < keys_end; k0 += kKeys) {
    __syncthreads();  // the previous tile is no longer read
    for (int idx = threadIdx.x; idx < kKeys * (D / 8); idx += kThreads) {
      const int r = idx / (D / 8), c = (idx % (D / 8)) * 8, key = k0 + r;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = kv;
      if (key < keys_end) {
        const int64_t block = table[key / p.block_size], slot = key % p.block_size;
        kv = *reinterpret_cast<const uint4*>(k_pool + block * p.k_block_stride +
                                             slot * p.k_token_stride + kv_head * p.k_head_stride +
                                             c);
        vv = *reinterpret_cast<const uint4*>(v_pool + block * p.v_block_stride +
                                             slot * p.v_token_stride + kv_head * p.v_head_stride +
                                             c);
      }
      *reinterpret_cast<uint4*>(&k_s[r][c]) = kv;
      *reinterpret_cast<uint4*>(&v_s[r][c]) = vv;
    }
    __syncthreads();
    if (k0 > warp_last) continue;  // causal: none of these keys is visible to this warp

    float s[kGroups][4];
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(&k_s[j * 8 + g][kc * 16 + 2 * t]);
        const uint32_t b1 =
            *reinterpret_cast<const uint32_t*>(&k_s[j * 8 + g][kc * 16 + 2 * t + 8]);
        mma<E>(s[j], qf[kc], b0, b1);
      }
    }
    // Row halves: C elements 0, 1 belong to row g, elements 2, 3 to row g + 8.
    float xa[kGroups][2], xb[kGroups][2];
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
      xa[j][0] = s[j][0];
      xa[j][1] = s[j][1];
      xb[j][0] = s[j][2];
      xb[j][1] = s[j][3];
    }
    const int key0 = k0 + 2 * t;
    const float corr_a = softmax_update(xa, key0, pos_a, valid_a, st_a);
    const float corr_b = softmax_update(xb, key0, pos_b, valid_b, st_b);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      o[nd][0] *= corr_a;
      o[nd][1] *= corr_a;
      o[nd][2] *= corr_b;
      o[nd][3] *= corr_b;
    }
    // O += P V over the tile, 16 keys per step.
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t a[4] = {pack2<E>(xa[2 * kk][0], xa[2 * kk][1]),
                             pack2<E>(xb[2 * kk][0], xb[2 * kk][1]),
                             pack2<E>(xa[2 * kk + 1][0], xa[2 * kk + 1][1]),
                             pack2<E>(xb[2 * kk + 1][0], xb[2 * kk + 1][1])};
      const int key = kk * 16 + 2 * t;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        const int c = nd * 8 + g;
        const uint32_t b0 =
            static_cast<uint32_t>(v_s[key][c]) | (static_cast<uint32_t>(v_s[key + 1][c]) << 16);
        const uint32_t b1 =
            static_cast<uint32_t>(v_s[key + 8][c]) | (static_cast<uint32_t>(v_s[key + 9][c]) << 16);
        mma<E>(o[nd], a, b0, b1);
      }
    }
  }

  // Normalized output of one row half: C elements {2 * half, 2 * half + 1} of every group.
  auto store = [&](int row, bool valid, float sum, int half) {
    if (!valid) return;
    const float inv = 1.0f / sum;
    float* out = p.out + (static_cast<int64_t>(begin + row) * p.num_q_heads + head) * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<float2*>(out + nd * 8 + 2 * t) =
          make_float2(o[nd][2 * half] * inv, o[nd][2 * half + 1] * inv);
  };
  const float sum_a = quad_sum(st_a.sum), sum_b = quad_sum(st_b.sum);
  store(row_a, valid_a, sum_a, 0);
  store(row_b, valid_b, sum_b, 1);
}

template <ElementType E, int D>
cudaError_t launch(const PagedLaunch& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>((p.max_seqlen_q + kRows - 1) / kRows),
                  static_cast<unsigned>(p.num_q_heads));
  return ::rlt::cuda::launch(prefill_tc_kernel<E, D>, grid, kThreads, 0, stream, p);
}

}  // namespace

Status launch_tensor_core_prefill(const PagedLaunch& p, CUstream_st* stream) {
  if (!tensor_core_prefill_supported(p.kv_element, p.head_dim)) {
    return invalid_argument(
        "cuda_paged: the tensor-core prefill takes 16-bit K/V with head_dim 64 "
        "or 128");
  }
  cudaError_t e = cudaSuccess;
  const bool f16 = p.kv_element == ElementType::kF16;
  if (p.head_dim == 64) {
    e = f16 ? launch<ElementType::kF16, 64>(p, stream) : launch<ElementType::kBF16, 64>(p, stream);
  } else {
    e = f16 ? launch<ElementType::kF16, 128>(p, stream)
            : launch<ElementType::kBF16, 128>(p, stream);
  }
  if (e != cudaSuccess) (void)cudaGetLastError();  // this call's error, reported once
  return ::rlt::cuda::cuda_status(static_cast<int>(e), "cuda_paged tensor-core prefill launch");
}

}  // namespace rlt::attention::cuda_paged
