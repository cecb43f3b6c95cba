// Element types rlt stores tensors in. Compute is f32; weights stay in their stored type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rlt {

enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

// Bytes per element.
size_t dtype_size(DType dtype);
// safetensors spelling: "F32", "BF16", "F16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL".
std::string_view dtype_name(DType dtype);
std::optional<DType> dtype_from_name(std::string_view name);
// Float types a model's weights may be held in.
inline bool is_weight_float(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace rlt
