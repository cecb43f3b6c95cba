// The SwiGLU activation, silu(g)·u = g / (1 + exp(-g)) · u, in f32 with an exponential of rlt's
// own. The scalar functions are the specification; the array form computes them with SIMD on
// every Highway target and gives the very same bits on all of them (and in any batch), because
// every step is one IEEE operation in a fixed order: no fused multiply-add, no library call.
//
// Why not std::exp: it is a scalar library call (~20 cycles per output), which at SmolLM2's
// 576-wide rows cost as much as the gate and up products themselves in a prefill.
#pragma once

#include <cstdint>

namespace rlt::kernels {

// e^x in f32: within 1 ulp of the exact value (0.96 at worst) for -87.33 ≤ x ≤ 88.72 (measured over
// the range, tests/kernels/swiglu_test.cpp); 0 below (where e^x < FLT_MIN), +inf above, NaN for
// NaN. Cody–Waite reduction by ln 2 and Cephes's degree-7 polynomial, evaluated without FMA.
float exp_f32(float x);

// g / (1 + exp_f32(-g)) · u, each operation rounded once in that order.
float silu_mul(float g, float u);

// out[i] = silu_mul(g[i], u[i]) for i < n, bit for bit, vectorized. out may alias g or u.
void silu_mul(const float* g, const float* u, int64_t n, float* out);

}  // namespace rlt::kernels
