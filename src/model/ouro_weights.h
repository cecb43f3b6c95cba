// Binds an Ouro checkpoint's tensors to the model's parts. Large matrices stay in their stored
// dtype inside the file mapping; only the vectors (norm weights, the exit gate) are widened to
// f32, a few KiB per layer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/cpu/weight_matrix.h"

namespace rlt::model {

struct OuroLayerWeights {
  kernels::WeightMatrix q_proj, k_proj, v_proj, o_proj;
  kernels::WeightMatrix gate_proj, up_proj, down_proj;
  std::vector<float> input_norm;         // input_layernorm: before attention
  std::vector<float> attn_out_norm;      // input_layernorm_2: on the attention output
  std::vector<float> post_attn_norm;     // post_attention_layernorm: before the MLP
  std::vector<float> mlp_out_norm;       // post_attention_layernorm_2: on the MLP output
};

struct OuroWeights {
  kernels::WeightMatrix embed_tokens;  // [vocab, hidden]
  kernels::WeightMatrix lm_head;       // [vocab, hidden]
  std::vector<float> final_norm;       // model.norm, applied at the end of every loop
  std::vector<float> exit_gate_weight; // [hidden]
  float exit_gate_bias = 0.0f;
  std::vector<OuroLayerWeights> layers;
};

// Every tensor an Ouro checkpoint with this config holds, with its exact shape.
std::vector<io::ExpectedTensor> ouro_expected_tensors(const io::ModelConfig& config);

// Validates the tensor set (names, shapes, dtypes) and binds it. The checkpoint must outlive the
// returned weights.
Result<OuroWeights> bind_ouro_weights(const io::Checkpoint& ckpt, const io::ModelConfig& config);

// A loaded model folder: config, generation config, checkpoint mapping and bound weights.
struct OuroModel {
  std::string dir;
  io::ModelConfig config;
  io::GenerationConfig generation;
  io::Checkpoint checkpoint;
  OuroWeights weights;

  // Stop token ids: generation_config.json's eos ids, else config.json's.
  std::vector<int64_t> eos_token_ids() const;
  // The dtype most weight bytes are stored in (for reports).
  DType weight_dtype() const;
};

// Loads config.json, generation_config.json and the safetensors of a Hugging Face model folder.
Result<std::shared_ptr<const OuroModel>> load_ouro_model(const std::string& dir);

}  // namespace rlt::model
