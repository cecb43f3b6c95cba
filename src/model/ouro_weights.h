// Binds a checkpoint's tensors (Ouro, or plain Llama as the one-loop case) to the model's parts.
// Linear weights are packed once, in their stored dtype, into the kernels' layout (with the q/k/v
// projections stacked and gate/up interleaved for the fused SwiGLU); GGUF matrices kept in their
// GGML block type are packed as quantized panels. The embedding table stays in the file mapping;
// vectors (norm weights, the exit gate) are widened to f32.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/gguf_model.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/cpu/packed_matrix.h"
#include "kernels/cpu/weight_matrix.h"
#include "rlt/config.h"
#include "rlt/status.h"
#include "source/model_source.h"

namespace rlt::model {

struct OuroLayerWeights {
  kernels::PackedMatrix qkv;          // q_proj, k_proj, v_proj stacked: [q_dim + 2·kv_dim] outputs
  kernels::PackedMatrix o_proj;       // [hidden] outputs
  kernels::PackedMatrix gate_up;      // silu(gate_proj) · up_proj: [intermediate] outputs
  kernels::PackedMatrix down_proj;    // [hidden] outputs
  std::vector<float> input_norm;      // input_layernorm: before attention
  std::vector<float> attn_out_norm;   // input_layernorm_2: on the attention output (Ouro only)
  std::vector<float> post_attn_norm;  // post_attention_layernorm: before the MLP
  std::vector<float> mlp_out_norm;    // post_attention_layernorm_2: on the MLP output (Ouro only)
  // Huginn: added to q and k before RoPE, [q_dim + kv_dim] (q's, then k's, in the rows' order);
  // empty otherwise.
  std::vector<float> qk_bias;

  // The packed bytes of the four matrices.
  int64_t linear_bytes() const { return qkv.bytes() + o_proj.bytes() + gate_up.bytes() + down_proj.bytes(); }
};

struct OuroWeights {
  kernels::WeightMatrix embed_tokens;   // [vocab, hidden], in the file mapping
  kernels::PackedMatrix lm_head;        // [vocab] outputs (embed_tokens when tied)
  std::vector<float> final_norm;        // model.norm: the end of every loop (Llama: once)
  std::vector<float> exit_gate_weight;  // [hidden]; empty without an exit gate (Llama)
  float exit_gate_bias = 0.0f;
  std::vector<OuroLayerWeights> layers;
  // Huginn (model/huginn_weights.h): the blocks before and after the recurrence, in the layers'
  // form (norm_1..4 as input, attn_out, post_attn, mlp_out), and the adapter [hidden, 2·hidden]
  // over concat[state, prelude output]. Empty otherwise.
  std::vector<OuroLayerWeights> prelude, coda;
  kernels::PackedMatrix adapter;
};

// A tensor's elements widened to f32 (the vectors: norm weights, gate, biases).
std::vector<float> widen_to_f32(const io::TensorView& t);

// Every tensor a checkpoint with this config holds (Ouro or Llama layout), with its exact shape.
std::vector<io::ExpectedTensor> ouro_expected_tensors(const io::ModelConfig& config);
// The same for any architecture (Huginn's names: huginn_weights.h), with the optional tensors
// `ckpt` holds.
std::vector<io::ExpectedTensor> expected_tensors(const io::ModelConfig& config, const io::Checkpoint& ckpt);

// Validates the tensor set (names, shapes, dtypes) and binds it. The checkpoint must outlive the
// returned weights. Without `pack_linear_layers`, the linear weights' packed matrices stay empty.
Result<OuroWeights> bind_ouro_weights(const io::Checkpoint& ckpt, const io::ModelConfig& config,
                                      kernels::PackOptions pack = {}, bool pack_linear_layers = true);

class BackgroundCacheWrite;  // packed_cache.h
class DeferredPacking;      // deferred_packing.h

struct LoadOptions {
  // Round activations to bf16 in the linear layers (bf16 weights, AVX512_BF16 CPUs only).
  bool bf16_activations = false;
  // Round activations to 8 bits per 32 columns for the quantized matrices (integer dot products;
  // AVX2 CPUs). Needs quantized weights.
  bool int8_activations = false;
  // Pack the linear weights for the CPU kernels. GPU runs upload the checkpoint's tensors instead
  // and leave the packed matrices empty (no second host copy of the weights).
  bool pack_for_cpu = true;
  // GGUF sources: quantized tensors computed on as stored (auto) or dequantized (--dtype).
  WeightDType quantized = WeightDType::kAuto;
  // Safetensors sources: the linear layers quantized at load (--quantize; CPU runs).
  QuantizeType quantize = QuantizeType::kNone;
  // The packed-weight cache's folder (--packed-cache; packed_cache.h; "auto": rlt's cache
  // folder's packed/); empty: no cache.
  std::string packed_cache_dir = {};
  // Write the packed-weight cache on a thread of its own (OuroModel::cache_write) instead of
  // before returning.
  bool write_cache_in_background = false;
  // CPU runs whose linear layers are bf16 / f16 tensors of the checkpoint's mapping, to be packed
  // as stored (no cache hit, no --quantize, f32 activations): return at once with the kernels
  // computing from the mapping, and leave the packing to the engine's spare time
  // (OuroModel::deferred_packing; deferred_packing.h). Same results bit for bit.
  bool defer_packing = false;
  // Bytes the caller allocates beside the weights (the KV pools): counted when checking, before
  // packing, that the model fits in memory.
  int64_t other_bytes = 0;
};

// What loading did and where its time went (the startup log prints it).
struct LoadReport {
  double open_seconds = 0;   // metadata, mappings, tensors converted at load (--quantize, --dtype)
  double pack_seconds = 0;   // packing the linear layers for the kernels (0 on a cache hit)
  double cache_seconds = 0;  // checking and mapping the packed-weight cache, or writing it
  // "off", "hit", "written" or "rebuilt" (a file found but not usable: `cache_note` says why),
  // "not written" (packing worked, writing failed: `cache_note`), "writing" (in the background:
  // OuroModel::cache_write).
  std::string cache = "off";
  std::string cache_path;
  std::string cache_note;
  int64_t packed_bytes = 0;  // the linear layers' packed bytes (resident, or mapped from the cache)
  bool packing_deferred = false;  // LoadOptions::defer_packing took effect
  std::string summary() const;
};

// The load options an engine configuration asks for (activations, --dtype, --quantize).
LoadOptions load_options(const EngineConfig& config);

// How a GGUF source's quantized tensors are loaded for --dtype: with auto on the CPU, the types
// the quantized kernels compute on stay in their blocks; everything else is dequantized.
io::QuantizedTensors quantized_tensors(WeightDType weights, bool for_cpu = true);

// A loaded model: config, generation config, checkpoint mapping and bound weights.
struct OuroModel {
  std::string dir;  // the source's path: a folder or a .gguf file
  io::ModelConfig config;
  io::GenerationConfig generation;
  io::Checkpoint checkpoint;
  // What loading changed that a user should know (matrices --quantize could not convert).
  std::vector<std::string> load_notes;
  LoadReport load_report;
  OuroWeights weights;
  // The packed-weight cache being written in the background (LoadOptions::
  // write_cache_in_background); after `weights`, so that its destructor, which waits for the
  // write, runs while the matrices it writes are alive.
  std::shared_ptr<BackgroundCacheWrite> cache_write;
  // The packing left to do (LoadOptions::defer_packing); null when none. Last, so that its
  // destructor (which, with a cache to write, packs what is left) runs while the matrices and the
  // checkpoint are alive.
  std::shared_ptr<DeferredPacking> deferred_packing;

  // Stop token ids: generation_config.json's eos ids, else config.json's.
  std::vector<int64_t> eos_token_ids() const;
  // The float dtype most weight bytes are stored in (for reports and the K/V cache's auto dtype);
  // matrices kept quantized do not count.
  DType weight_dtype() const;
  // The GGML types of the matrices kept quantized, most bytes first ("Q4_1, Q8_0"); empty when
  // none are.
  std::string quantized_types() const;
  // Weight bytes one token streams through the linear kernels per loop of the core (all layers),
  // and once per token for the lm head: the numerator of the decode roofline. The packed sizes
  // when packed for the CPU, else the checkpoint's.
  int64_t core_weight_bytes_per_loop() const;
  int64_t lm_head_bytes() const;
  // Weight bytes of the blocks outside the recurrence (Huginn's prelude and coda, packed): a
  // generated token streams them once, beside the lm head. 0 for other models.
  int64_t outer_block_bytes() const;
};

// Loads the config, generation config and weights of a model source (a Hugging Face folder or a
// GGUF file). With bf16_activations, a checkpoint not stored in bf16 or a CPU without AVX512_BF16
// is an error that says so (an explicit choice never falls back silently).
Result<std::shared_ptr<const OuroModel>> load_ouro_model(const source::ModelSource& source,
                                                         LoadOptions options = {});
// The same for a path (source::ModelSource::open first).
Result<std::shared_ptr<const OuroModel>> load_ouro_model(const std::string& path,
                                                         LoadOptions options = {});

}  // namespace rlt::model
