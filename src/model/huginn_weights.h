// Binds a Huginn-0125 checkpoint (huginn_raven; tensor names of the official
// raven_modeling_minimal.py) to the model's parts, in the same form as Ouro's layers so that the
// CPU executor runs its blocks (docs/models.md):
//   transformer.{prelude,core_block,coda}.{i}.norm_{1..4}  -> input, attn_out, post_attn, mlp_out
//   attn.Wqkv [3H, H]       -> qkv, each head's q and k rows reordered from adjacent RoPE pairs
//                              (2i, 2i+1) to split halves (i, i + d/2), so that the kernels'
//                              split-half RoPE computes the same scores
//   attn.qk_bias [2,1,nh,d] -> qk_bias, reordered the same way
//   attn.proj, mlp.fc (gate rows, then up rows), mlp.proj -> o_proj, gate_up, down_proj
//   transformer.adapter [H, 2H], transformer.ln_f (final_norm), transformer.wte (the embedding
//   and the tied head). `lm_head.weight` and the `freqs_cis` table, which exports may store, are
//   checked (equal to the embedding; RoPE of the config's base) and not used.
#pragma once

#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/cpu/packed_matrix.h"
#include "model/ouro_weights.h"
#include "rlt/status.h"

namespace rlt::model {

// Every tensor a Huginn checkpoint holds, with its exact shape; with `present`, also the optional
// ones (lm_head.weight, freqs_cis) it holds.
std::vector<io::ExpectedTensor> huginn_expected_tensors(const io::ModelConfig& config,
                                                        const io::Checkpoint* present = nullptr);

// Validates and binds; without `pack_linear_layers` the packed matrices stay empty.
Result<OuroWeights> bind_huginn_weights(const io::Checkpoint& ckpt, const io::ModelConfig& config,
                                        kernels::PackOptions pack, bool pack_linear_layers);

}  // namespace rlt::model
