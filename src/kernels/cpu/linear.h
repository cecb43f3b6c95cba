// Linear layers over pre-packed weights (f32, bf16, f16) with f32 activations and accumulation.
//
// Every output element y[m, n] = Σ_k x[m, k] · W[n, k] is reduced in one fixed order that does
// not depend on how many rows are in the batch, on the thread count or on the tiling, so a token
// gives bit-identical results alone, in a batch, in prefill or in decode (batch invariance).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/packed_matrix.h"

namespace rlt::kernels {

// y[m, w.outputs()] = x[m, w.cols()] · Wᵀ, with w's epilogue applied (plain or SwiGLU).
// x and y must not alias.
void linear(const float* x, int64_t m, const PackedMatrix& w, float* y);

// Name of the SIMD target the dispatcher picked for this CPU, e.g. "AVX3_ZEN4" or "AVX2".
std::string cpu_dispatch_target();

}  // namespace rlt::kernels
