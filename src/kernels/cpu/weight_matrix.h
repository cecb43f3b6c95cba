// A 2-D weight in its stored type, row-major [rows, cols] = [out_features, in_features], as in
// Hugging Face linear layers (y = x · Wᵀ). The data is not owned (usually a checkpoint mapping).
// Rows hold either float elements (dtype) or, when `quant` is set, GGML blocks of that type (a
// GGUF tensor used as stored).
#pragma once

#include <cstdint>
#include <optional>

#include "common/dtype.h"
#include "quant/ggml_type.h"

namespace rlt::kernels {

struct WeightMatrix {
  DType dtype = DType::kF32;  // F32, BF16 or F16 (ignored when quant is set)
  int64_t rows = 0;           // output features
  int64_t cols = 0;           // input features
  const void* data = nullptr;
  std::optional<quant::GgmlType> quant = std::nullopt;  // rows of GGML blocks

  bool quantized() const { return quant.has_value(); }
  // Bytes of one stored row.
  int64_t row_bytes() const;
  // Element (r, c) widened to f32; for tests and scalar reference paths only.
  float at(int64_t r, int64_t c) const;
  // Widens (or dequantizes) row r into out[cols].
  void row_to_f32(int64_t r, float* out) const;
};

}  // namespace rlt::kernels
