// The transformer's elementwise and per-row kernels on the GPU, matching kernels/cpu/ops.h
// (same formulas, f32 arithmetic; reductions in a fixed tree order, so a row's result depends on
// that row alone). C++17 declarations without CUDA headers; every pointer is a device pointer and
// every call launches on `stream` and returns the launch status.
#pragma once

#include <cstdint>

#include "rlt/status.h"

struct CUstream_st;

namespace rlt::cuda {

enum class ElementType : int32_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

// out[r, :] = table[tokens[r], :] widened to f32; table is [vocab, hidden] in `type`.
Status embed_rows(const void* table, ElementType type, int64_t hidden, const int32_t* tokens,
                  int64_t rows, float* out, CUstream_st* stream);

// y[r] = w ⊙ (x[r] / sqrt(mean(x[r]²) + eps)); y may equal x.
Status rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y,
                CUstream_st* stream);
// The same, y stored in `y_type` (rounded to nearest even, as convert_from_f32): a 16-bit GEMM
// input written directly by its producer.
Status rms_norm_to(const float* x, const float* w, int64_t rows, int64_t n, float eps, void* y,
                   ElementType y_type, CUstream_st* stream);

// h[r] += w ⊙ (x[r] / sqrt(mean(x[r]²) + eps)) (Ouro's sandwich residual).
Status add_rms_norm(float* h, const float* x, const float* w, int64_t rows, int64_t n, float eps,
                    CUstream_st* stream);

// add_rms_norm, then y[r] = next_w ⊙ (h[r] / sqrt(mean(h[r]²) + eps)) in the same kernel: the
// residual ending one sublayer and the norm opening the next (or the loop's final norm; y may
// be h). Bit-identical to the two calls (same per-thread order, same block reduction). y is
// stored in `y_type` (a GEMM input written directly; f32 when y is h).
Status add_rms_norm_then_norm(float* h, const float* x, const float* w, const float* next_w,
                              int64_t rows, int64_t n, float eps, void* y, ElementType y_type,
                              CUstream_st* stream);

// h[i] += x[i].
Status add_in_place(float* h, const float* x, int64_t n, CUstream_st* stream);

// Splits fused q/k/v rows, applies split-half RoPE ("rotate_half") to q and k at each row's
// position, writes q to q_out and K/V (converted to the cache type) into each row's page slot.
struct RopeKvWrite {
  const float* qkv = nullptr;  // [rows, (num_heads + 2·num_kv_heads)·head_dim]
  int64_t rows = 0;
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  const int32_t* positions = nullptr;  // [rows]
  const float* inv_freq = nullptr;     // [head_dim / 2]
  float* q_out = nullptr;              // [rows, num_heads·head_dim]
  void* k_cache = nullptr;             // one layer's view base (element strides below)
  void* v_cache = nullptr;
  ElementType cache_type = ElementType::kBF16;
  int64_t block_stride = 0, token_stride = 0, head_stride = 0;
  const int32_t* write_block = nullptr;  // [rows]: the page of the row's depth plane
  const int32_t* write_slot = nullptr;   // [rows]
};
Status rope_and_write_kv(const RopeKvWrite& args, CUstream_st* stream);

// out[r, i] = silu(gate_up[r, i]) · gate_up[r, I + i] for i < I (gate rows first, then up),
// stored in `out_type`.
Status silu_mul(const float* gate_up, int64_t rows, int64_t intermediate, void* out,
                ElementType out_type, CUstream_st* stream);

// out[r] = h[r] · w + bias (the exit gate's logit).
Status gate_logits(const float* h, const float* w, float bias, int64_t rows, int64_t n, float* out,
                   CUstream_st* stream);

// y[i] = x[i] rounded to `type` (round to nearest even); the input of 16-bit GEMMs.
Status convert_from_f32(const float* x, ElementType type, void* y, int64_t n, CUstream_st* stream);

// Whether the current device runs these kernels from code built for sm_90 or newer, where
// wait_for_upstream_kernels() (cuda/launch.cuh) is compiled in. False when the driver JIT-compiles
// older PTX (e.g. sm_80 code on an sm_103 part, or a build without sm_90): programmatic dependent
// launch would then let kernels read before their producers finish.
Result<bool> kernels_wait_for_upstream();

// dst[r, :] = src[index[r], :] and its reverse, for per-request hidden-state slots.
Status gather_rows(const float* src, const int32_t* index, int64_t rows, int64_t n, float* dst,
                   CUstream_st* stream);
Status scatter_rows(const float* src, const int32_t* index, int64_t rows, int64_t n, float* dst,
                    CUstream_st* stream);

}  // namespace rlt::cuda
