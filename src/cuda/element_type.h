// The element types the CUDA kernels read and write, and the mapping from stored dtypes.
#pragma once

#include <string_view>

#include "common/dtype.h"
#include "cuda/model_kernels.h"
#include "rlt/status.h"

namespace rlt::cuda {

// f32, bf16 or f16; any other dtype is an error naming `what` (a tensor, the KV cache).
Result<ElementType> element_type_of(DType dtype, std::string_view what);

}  // namespace rlt::cuda
