#include "kernels/cpu/weight_matrix.h"

#include <vector>

#include "common/half.h"
#include "quant/dequantize.h"

namespace rlt::kernels {

int64_t WeightMatrix::row_bytes() const {
  if (quant) return quant::ggml_row_bytes(*quant, cols).value_or(0);
  return cols * static_cast<int64_t>(dtype_size(dtype));
}

float WeightMatrix::at(int64_t r, int64_t c) const {
  if (quant) {
    std::vector<float> row(static_cast<size_t>(cols));
    row_to_f32(r, row.data());
    return row[static_cast<size_t>(c)];
  }
  int64_t i = r * cols + c;
  switch (dtype) {
    case DType::kBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16:
      return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

void WeightMatrix::row_to_f32(int64_t r, float* out) const {
  if (quant) {
    // The matrix was validated when it was bound (whole blocks per row, a dequantizable type).
    (void)quant::dequantize_row(*quant, static_cast<const uint8_t*>(data) + r * row_bytes(), cols,
                                out);
    return;
  }
  for (int64_t c = 0; c < cols; ++c) out[c] = at(r, c);
}

}  // namespace rlt::kernels
