#include "cuda/element_type.h"

#include <fmt/format.h>

namespace rlt::cuda {

Result<ElementType> element_type_of(DType dtype, std::string_view what) {
  switch (dtype) {
    case DType::kF32:
      return ElementType::kF32;
    case DType::kBF16:
      return ElementType::kBF16;
    case DType::kF16:
      return ElementType::kF16;
    default:
      return invalid_argument(fmt::format(
          "{} is stored as {}; the CUDA kernels take f32, bf16 or f16", what, dtype_name(dtype)));
  }
}

}  // namespace rlt::cuda
