// Element types rlt stores tensors in. Compute is f32; weights stay in their stored type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rlt {

// kQ8_0 is a K/V cache encoding, never a checkpoint tensor's dtype: GGML's q8_0 blocks (an f16
// scale, then 32 int8 values) over each row of head_dim values; its sizes count bytes (kv_types.h).
enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool, kQ8_0 };

// Bytes per element (kQ8_0: 1, its unit being a byte).
size_t dtype_size(DType dtype);
// safetensors spelling: "F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL";
// "Q8_0" for the K/V encoding, which dtype_from_name never returns.
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
// Float types a model's weights may be held in.
inline bool is_weight_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace rlt
