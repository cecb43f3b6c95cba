// Writes safetensors files (used to create rlt's embedded demo checkpoint and test fixtures).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "rlt/status.h"

namespace rlt::io {

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // raw little-endian element data
};

// Tensors are laid out widest dtype first, then by name, with the header padded to 8 bytes, as the
// reference implementation writes them; the same tensors always give the same file bytes.
Status write_safetensors(const std::string& path, std::vector<TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace rlt::io
