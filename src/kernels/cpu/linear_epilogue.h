// Writing one panel's results: plain outputs, or silu(gate)·up for a SwiGLU panel. Shared by the
// f32-activation kernel and the bf16 dot-product kernel so both give the same epilogue.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/swiglu.h"

namespace rlt::kernels {

// out: `rows` rows of kPanelWidth sums (row stride kPanelWidth) for panel p, input rows m0...;
// of a plain panel, only its outputs [o0, o1) when given (SwiGLU panels are stored whole).
inline void store_panel(const PackedMatrix& w, int64_t p, const float* out, int rows, int64_t m0,
                        float* y, int64_t o0 = 0, int64_t o1 = PackedMatrix::kPanelWidth) {
  constexpr int64_t kPanel = PackedMatrix::kPanelWidth;
  const int64_t n = w.outputs();
  if (w.epilogue() == PackedMatrix::Epilogue::kSwiGLU) {
    constexpr int64_t kHalf = kPanel / 2;
    const int64_t first = p * kHalf, count = std::min(kHalf, n - first);
    for (int r = 0; r < rows; ++r) {
      const float* o = out + r * kPanel;
      silu_mul(o, o + kHalf, count, y + (m0 + r) * n + first);
    }
    return;
  }
  const int64_t first = p * kPanel, end = std::min(o1, n - first);
  for (int r = 0; r < rows && o0 < end; ++r)
    std::copy(out + r * kPanel + o0, out + r * kPanel + end, y + (m0 + r) * n + first + o0);
}

}  // namespace rlt::kernels
