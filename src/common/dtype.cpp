#include "common/dtype.h"

#include <array>
#include <utility>

namespace rlt {
namespace {
constexpr std::array<std::pair<DType, std::string_view>, 10> kNames = {{
    {DType::kF32, "F32"}, {DType::kBF16, "BF16"}, {DType::kF16, "F16"}, {DType::kF64, "F64"},
    {DType::kI64, "I64"}, {DType::kI32, "I32"}, {DType::kI16, "I16"}, {DType::kI8, "I8"},
    {DType::kU8, "U8"}, {DType::kBool, "BOOL"},
}};
}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: case DType::kI16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: case DType::kQ8_0: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  if (dtype == DType::kQ8_0) return "Q8_0";
  for (const auto& [d, n] : kNames)
    if (d == dtype) return n;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& [d, n] : kNames)
    if (n == name) return d;
  return std::nullopt;
}

}  // namespace rlt
