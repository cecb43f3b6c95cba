// GGML tensor types as GGUF files store them: ids, block geometry, names. The id numbers are the
// file format's (ggml.h); a type rlt cannot compute with is still known by name, so an error can
// say which one a file uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace rlt::quant {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  std::string_view name;  // as ggml spells it: "Q4_K"
  int64_t block_elems;    // values per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
  bool dequantizable;     // rlt can turn it into floats
};

// The traits of a known type id; nullopt for an id ggml does not define (or retired).
std::optional<GgmlTypeInfo> ggml_type_info(uint32_t id);
std::string_view ggml_type_name(GgmlType type);
// Bytes a row of `elems` values takes; nullopt when `elems` is not a whole number of blocks or
// the size overflows 64 bits.
std::optional<int64_t> ggml_row_bytes(GgmlType type, int64_t elems);

}  // namespace rlt::quant
