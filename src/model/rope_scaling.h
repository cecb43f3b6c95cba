// Rotary inverse frequencies of a model, with its Hugging Face `rope_scaling` applied.
#pragma once

#include <vector>

#include "io/model_config.h"

namespace rlt::model {

// inv_freq[i] for i < head_dim / 2, in f32 as transformers computes them: the default
// 1 / theta^(2i/d), divided by `factor` for linear scaling, or the llama3 piecewise rule (long
// wavelengths divided by `factor`, short ones kept, the band between interpolated smoothly).
std::vector<float> rope_inv_freq(const io::ModelConfig& config);

}  // namespace rlt::model
