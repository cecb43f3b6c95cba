// The int8-activation kernel: y = x · Wᵀ for a matrix packed with
// PackedMatrix::Layout::kQuantInt8 (`--activation-dtype int8`), computed with integer dot products
// the way llama.cpp multiplies its quantized matrices.
//
// Each input row is rounded to 8 bits per group of 32 columns: d = max|x| / 127 and
// qx = round(x / d) in [-127, 127] (QuantizedActivations below). Each output is then reduced in
// one fixed order, per weight group g (32 columns; Q6_K 16):
//   isum  = Σ q · qx over the group, exact in int32 (q as stored, then −q_offset · Σ qx);
//   y     = fma(scale(g) · d(g), isum, y), then y = fma(offset(g), d(g) · Σ qx, y) for types with
//           an offset,
// with scale and offset the f32 kernel's (quant_panels.h). The integer sums are exact and the
// float steps are the same for every tile, so results are bit-identical alone, in a batch and at
// any thread count. Against the product with f32 activations the difference is the activations'
// rounding: at most d(g) / 2 per activation, a relative 1/254 of the group's largest |x|.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/packed_matrix.h"

namespace rlt::kernels {

// Whether this CPU runs the int8 kernel (x86 from AVX2 up, AArch64). Without it, packing keeps
// the f32-activation layout.
bool linear_quant_int8_supported();
// The variant this CPU runs ("AVX2 vpmaddubsw", "AVX-512 vpmaddubsw", "AVX-512 VNNI vpdpbusd",
// "NEON widening multiplies"), empty where there is none.
std::string linear_quant_int8_kernel();

void linear_quant_int8(const float* x, int64_t m, const PackedMatrix& w, float* y);

// Rows of activations rounded to 8 bits per 32 columns (k a multiple of 32).
struct QuantizedActivations {
  int64_t rows = 0, cols = 0;
  std::vector<int8_t> q;       // [row][col]
  std::vector<float> d;        // [row][col / 32]: the group's step
  std::vector<int32_t> sum16;  // [row][col / 16]: Σ q over each 16 columns
  std::vector<float> dsum;  // [row][col / 32]: d · Σ q over the group (the offset terms' factor)
};
void quantize_activations(const float* x, int64_t m, int64_t k, QuantizedActivations& out);

}  // namespace rlt::kernels
