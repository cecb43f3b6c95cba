#include "kernels/cpu/weight_matrix.h"

#include "common/half.h"

namespace rlt::kernels {

float WeightMatrix::at(int64_t r, int64_t c) const {
  int64_t i = r * cols + c;
  switch (dtype) {
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: return static_cast<const float*>(data)[i];
  }
}

void WeightMatrix::row_to_f32(int64_t r, float* out) const {
  for (int64_t c = 0; c < cols; ++c) out[c] = at(r, c);
}

}  // namespace rlt::kernels
