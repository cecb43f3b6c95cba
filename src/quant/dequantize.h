// GGML block formats turned into f32 values, bit for bit as ggml's reference dequantization (and
// the `gguf` Python package's) computes them: each product and difference rounded in f32 in the
// same order, never fused. The block layouts are those of ggml-common.h.
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::quant {

// Dequantizes `elems` values stored from `src` (a whole number of `type`'s blocks) into `dst`.
// Types without a dequantization (ggml_type_info(...).dequantizable == false) are an error.
Status dequantize_row(GgmlType type, const uint8_t* src, int64_t elems, float* dst);

}  // namespace rlt::quant
