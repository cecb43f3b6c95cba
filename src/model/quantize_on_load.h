// `--quantize`: a safetensors checkpoint's linear-layer matrices quantized into GGML blocks at
// load, so the CPU's quantized kernels stream a quarter (Q4_K) to a half (Q8_0) of the bf16 bytes.
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::model {

// The checkpoint with every q/k/v/o, gate/up/down projection (and an untied lm head) quantized
// into `type`; everything else as it was. Matrices whose input width is not a whole number of
// the type's blocks (K-quants: 256) fall back to Q8_0 (blocks of 32), as llama.cpp's quantizer
// does, or stay as stored when even that does not divide them; `notes` says which. The quantized
// tensors get their type and size now and their blocks when materialized
// (io::Checkpoint::materialize): loading quantizes a layer at a time as it packs, and a load that
// maps the packed-weight cache never quantizes at all.
Result<io::Checkpoint> quantize_linear_weights(io::Checkpoint checkpoint,
                                               const io::ModelConfig& config, QuantizeType type,
                                               std::vector<std::string>* notes);

}  // namespace rlt::model
