// A 2-D weight in its stored dtype, row-major [rows, cols] = [out_features, in_features], as in
// Hugging Face linear layers (y = x · Wᵀ). The data is not owned (usually a checkpoint mapping).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace rlt::kernels {

struct WeightMatrix {
  DType dtype = DType::kF32;  // F32, BF16 or F16
  int64_t rows = 0;           // output features
  int64_t cols = 0;           // input features
  const void* data = nullptr;

  // Element (r, c) widened to f32; for tests and scalar reference paths only.
  float at(int64_t r, int64_t c) const;
  // Widens row r into out[cols].
  void row_to_f32(int64_t r, float* out) const;
};

}  // namespace rlt::kernels
