// The quantized kernel: y = x · Wᵀ for a matrix packed with PackedMatrix::Layout::kQuant, f32
// activations, computed on the quantized bytes (never a dequantized copy of the matrix).
//
// Each output is reduced in one fixed order, per group g of 32 (Q6_K: 16) input columns:
//   inner = fma chain of x[k] · q[k] over the group's columns, in order (q converted to f32
//           exactly);
//   y     = fma(scale(g), inner, y), then y = fma(offset(g), Σ_g x, y) for types with an offset,
// with Σ_g x summed in column order once per input row. Row tiling, slices and threads only
// share loads, so results are bit-identical alone, in a batch and at any thread count. Against the
// product with the dequantized matrix the error is a few f32 roundings per group (bound in
// tests/kernels/linear_quant_test.cpp).
#pragma once

#include <cstdint>

#include "kernels/cpu/packed_matrix.h"

namespace rlt::kernels {

void linear_quant(const float* x, int64_t m, const PackedMatrix& w, float* y);

}  // namespace rlt::kernels
