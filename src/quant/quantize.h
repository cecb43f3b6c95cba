// Float rows into GGML blocks, as ggml's reference quantizers compute them (quantize_row_*_ref):
// Q8_0 (absmax / 127 per 32 values), Q4_K (per 32 values a weighted least-squares scale and min,
// 6-bit sub-scales under an f16 super-block scale) and Q6_K (per 16 values a searched signed
// scale, 8-bit sub-scales). What `--quantize` applies to safetensors checkpoints at load and
// `rlt convert` writes. F32 / F16 / BF16 rows are written too (rounded to nearest even).
#pragma once

#include <cstdint>

#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::quant {

// True for the types quantize_row writes.
bool can_quantize(GgmlType type);

// Quantizes `elems` values (a whole number of `type`'s blocks) from `src` into `dst`
// (ggml_row_bytes(type, elems) bytes).
Status quantize_row(GgmlType type, const float* src, int64_t elems, uint8_t* dst);

}  // namespace rlt::quant
