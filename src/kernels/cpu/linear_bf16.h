// The bf16 dot-product kernel (AVX512_BF16 `vdpbf16ps`): bf16 weights times activations rounded to
// bf16, two products per lane per instruction, accumulated in f32. Twice the multiply rate of the
// f32-activation kernel, at the precision a bf16 PyTorch model computes with (activations carry 8
// significant bits into each product). Opt-in per model (`--activation-dtype bf16`).
#pragma once

#include <cstdint>

#include "kernels/cpu/packed_matrix.h"

namespace rlt::kernels {

// True when this CPU executes vdpbf16ps (and the build targets x86-64).
bool bf16_dot_supported();

// y = x · Wᵀ for a matrix packed with Layout::kBf16Pairs. Per output, one f32 accumulator takes
// the column pairs (0,1), (2,3), ... in order, so results do not depend on the batch or the
// thread count.
void linear_bf16_pairs(const float* x, int64_t m, const PackedMatrix& w, float* y);

}  // namespace rlt::kernels
