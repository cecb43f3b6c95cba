#include "quant/ggml_type.h"

#include <array>
#include <limits>

namespace rlt::quant {
namespace {

// Block geometry from ggml-common.h (QK4_0 = 32, QK_K = 256, ...).
constexpr std::array kTypes = {
    GgmlTypeInfo{GgmlType::kF32, "F32", 1, 4, true},
    GgmlTypeInfo{GgmlType::kF16, "F16", 1, 2, true},
    GgmlTypeInfo{GgmlType::kQ4_0, "Q4_0", 32, 18, true},
    GgmlTypeInfo{GgmlType::kQ4_1, "Q4_1", 32, 20, true},
    GgmlTypeInfo{GgmlType::kQ5_0, "Q5_0", 32, 22, true},
    GgmlTypeInfo{GgmlType::kQ5_1, "Q5_1", 32, 24, true},
    GgmlTypeInfo{GgmlType::kQ8_0, "Q8_0", 32, 34, true},
    GgmlTypeInfo{GgmlType::kQ8_1, "Q8_1", 32, 36, false},
    GgmlTypeInfo{GgmlType::kQ2_K, "Q2_K", 256, 84, true},
    GgmlTypeInfo{GgmlType::kQ3_K, "Q3_K", 256, 110, true},
    GgmlTypeInfo{GgmlType::kQ4_K, "Q4_K", 256, 144, true},
    GgmlTypeInfo{GgmlType::kQ5_K, "Q5_K", 256, 176, true},
    GgmlTypeInfo{GgmlType::kQ6_K, "Q6_K", 256, 210, true},
    GgmlTypeInfo{GgmlType::kQ8_K, "Q8_K", 256, 292, false},
    GgmlTypeInfo{GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66, false},
    GgmlTypeInfo{GgmlType::kIQ2_XS, "IQ2_XS", 256, 74, false},
    GgmlTypeInfo{GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98, false},
    GgmlTypeInfo{GgmlType::kIQ1_S, "IQ1_S", 256, 50, false},
    GgmlTypeInfo{GgmlType::kIQ4_NL, "IQ4_NL", 32, 18, false},
    GgmlTypeInfo{GgmlType::kIQ3_S, "IQ3_S", 256, 110, false},
    GgmlTypeInfo{GgmlType::kIQ2_S, "IQ2_S", 256, 82, false},
    GgmlTypeInfo{GgmlType::kIQ4_XS, "IQ4_XS", 256, 136, false},
    GgmlTypeInfo{GgmlType::kI8, "I8", 1, 1, false},
    GgmlTypeInfo{GgmlType::kI16, "I16", 1, 2, false},
    GgmlTypeInfo{GgmlType::kI32, "I32", 1, 4, false},
    GgmlTypeInfo{GgmlType::kI64, "I64", 1, 8, false},
    GgmlTypeInfo{GgmlType::kF64, "F64", 1, 8, false},
    GgmlTypeInfo{GgmlType::kIQ1_M, "IQ1_M", 256, 56, false},
    GgmlTypeInfo{GgmlType::kBF16, "BF16", 1, 2, true},
    GgmlTypeInfo{GgmlType::kTQ1_0, "TQ1_0", 256, 54, false},
    GgmlTypeInfo{GgmlType::kTQ2_0, "TQ2_0", 256, 66, false},
    GgmlTypeInfo{GgmlType::kMXFP4, "MXFP4", 32, 17, false},
};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return t;
  return std::nullopt;
}

std::string_view ggml_type_name(GgmlType type) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  return info ? info->name : "unknown";
}

std::optional<int64_t> ggml_row_bytes(GgmlType type, int64_t elems) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info || elems < 0 || elems % info->block_elems != 0) return std::nullopt;
  const int64_t blocks = elems / info->block_elems;
  if (blocks > std::numeric_limits<int64_t>::max() / info->block_bytes) return std::nullopt;  // overflow
  return blocks * info->block_bytes;
}

}  // namespace rlt::quant
