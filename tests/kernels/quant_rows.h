// Random GGML-quantized matrices for the quantized kernels' tests: rows of blocks as a GGUF file
// stores them (quant::random_blocks), viewed as the WeightMatrix the packer takes.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/weight_matrix.h"
#include "quant/ggml_type.h"
#include "quant/random_blocks.h"

namespace rlt::kernels {

struct QuantRows {
  quant::GgmlType type;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;
  WeightMatrix view() const { return {DType::kF32, rows, cols, bytes.data(), type}; }
  const uint8_t* row(int64_t r) const { return bytes.data() + r * view().row_bytes(); }
};

inline QuantRows random_rows(quant::GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const int64_t blocks =
      rows * cols / quant::ggml_type_info(static_cast<uint32_t>(type))->block_elems;
  return {type, rows, cols, quant::random_blocks(type, blocks, static_cast<uint32_t>(rng()))};
}

}  // namespace rlt::kernels
