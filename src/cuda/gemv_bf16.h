// bf16-weight GEMV on the GPU: y[rows] = W[rows, cols] · x[cols], f32 accumulation. One warp per
// output row with 16-byte loads (8 bf16 per lane per step), the shape that beat cuBLAS at Ouro's
// decode shapes in the reference measurements. All pointers are device pointers.
#pragma once

#include <cstdint>

#include "rlt/status.h"

struct CUstream_st;

namespace rlt::cuda {

// Launches on `stream` (null: the default stream); returns the launch status (asynchronous).
// When the column count is not a multiple of 8 or w's rows or x are not 16-byte aligned, rows
// are read with 2-byte loads throughout (correct, several times slower; the engine's matrices
// and activations are always aligned).
Status gemv_bf16(const uint16_t* w, const float* x, float* y, int64_t rows, int64_t cols,
                 CUstream_st* stream);

// The gate/up projection and SwiGLU of one decode row in one launch: w_gate_up is the stacked
// [2 · intermediate, cols] matrix (gate rows, then up rows) and act[i] = silu(gate_i) · up_i,
// bit for bit what gemv_bf16 followed by silu_mul gives, one kernel launch fewer.
Status gemv_bf16_swiglu(const uint16_t* w_gate_up, const float* x, float* act, int64_t intermediate,
                        int64_t cols, CUstream_st* stream);

// A decode row's sandwich-norm residual and the next sublayer's norm, folded into that sublayer's
// first projection: h ← h + RMSNorm(sublayer) ⊙ out_norm, then the GEMV (or the gate/up GEMV with
// SwiGLU) of RMSNorm(h) ⊙ next_norm, all in one launch — bit for bit add_rms_norm_then_norm
// followed by gemv_bf16 / gemv_bf16_swiglu, one launch fewer. h and sublayer are one row of `cols`
// floats; done_blocks is a device counter that starts at 0 and is left at 0 (launches that share
// it must not overlap: one counter per stream).
struct ResidualNorm {
  float* h = nullptr;
  const float* sublayer = nullptr;
  const float* out_norm = nullptr;
  const float* next_norm = nullptr;
  float eps = 0.0f;
  unsigned* done_blocks = nullptr;
};

// Both rows of the norm live in shared memory: up to 6,144 columns (48 KiB).
constexpr int64_t kMaxResidualNormColumns = 6144;
inline bool gemv_residual_norm_supported(int64_t cols) {
  return cols > 0 && cols <= kMaxResidualNormColumns;
}

Status gemv_bf16_residual_norm(const uint16_t* w, int64_t rows, int64_t cols,
                               const ResidualNorm& rn, float* y, CUstream_st* stream);
Status gemv_bf16_residual_norm_swiglu(const uint16_t* w_gate_up, int64_t intermediate, int64_t cols,
                                      const ResidualNorm& rn, float* act, CUstream_st* stream);

}  // namespace rlt::cuda
