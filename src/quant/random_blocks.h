// GGML blocks with random quants and scales of realistic magnitude: the weights of benchmarks and
// tests at shapes no real file has (random checkpoints are rlt's tool for large shapes).
#pragma once

#include <cstdint>
#include <vector>

#include "quant/ggml_type.h"

namespace rlt::quant {

// `blocks` blocks of a block-quantized type: every quant and packed-scale byte uniform, the f16
// fields (d, dmin, Q4_1's m) set as a quantizer leaves them: d in [1e-3, 2e-2] per block (the
// K-quants' super-block d and dmin in [1e-3, 2e-2] / 16, as their 6-bit sub-scales multiply
// them), Q4_1's m in [-8d, 0]. Deterministic for a seed.
std::vector<uint8_t> random_blocks(GgmlType type, int64_t blocks, uint32_t seed);

}  // namespace rlt::quant
