#include "model/ouro_weights.h"

#include <fmt/format.h>

#include <map>

#include "common/half.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "kernels/cpu/quant_panels.h"
#include "model/quantize_on_load.h"

namespace rlt::model {
namespace {

std::string layer_name(int64_t i, const char* suffix) {
  return fmt::format("model.layers.{}.{}", i, suffix);
}

kernels::WeightMatrix matrix(const io::TensorView& t) {
  return {t.dtype, t.shape[0], t.shape.size() > 1 ? t.shape[1] : 1, t.data, t.quant};
}

// The linear layers' weights of one layer (the matrices packed for the kernels).
constexpr const char* kLinearSuffixes[] = {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                           "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                           "mlp.gate_proj.weight",    "mlp.up_proj.weight",
                                           "mlp.down_proj.weight"};

std::vector<float> widen(const io::TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::WeightMatrix m{t.dtype, 1, t.numel(), t.data};
  m.row_to_f32(0, out.data());
  return out;
}

}  // namespace

std::vector<io::ExpectedTensor> ouro_expected_tensors(const io::ModelConfig& c) {
  const int64_t h = c.hidden_size;
  std::vector<io::ExpectedTensor> out = {
      {"model.embed_tokens.weight", {c.vocab_size, h}},
      {"model.norm.weight", {h}},
  };
  if (c.has_exit_gate()) {
    out.push_back({"model.early_exit_gate.weight", {1, h}});
    out.push_back({"model.early_exit_gate.bias", {1}});
  }
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    out.push_back({layer_name(i, "self_attn.q_proj.weight"), {c.q_dim(), h}});
    out.push_back({layer_name(i, "self_attn.k_proj.weight"), {c.kv_dim(), h}});
    out.push_back({layer_name(i, "self_attn.v_proj.weight"), {c.kv_dim(), h}});
    out.push_back({layer_name(i, "self_attn.o_proj.weight"), {h, c.q_dim()}});
    out.push_back({layer_name(i, "mlp.gate_proj.weight"), {c.intermediate_size, h}});
    out.push_back({layer_name(i, "mlp.up_proj.weight"), {c.intermediate_size, h}});
    out.push_back({layer_name(i, "mlp.down_proj.weight"), {h, c.intermediate_size}});
    out.push_back({layer_name(i, "input_layernorm.weight"), {h}});
    out.push_back({layer_name(i, "post_attention_layernorm.weight"), {h}});
    if (c.sandwich_norms()) {
      out.push_back({layer_name(i, "input_layernorm_2.weight"), {h}});
      out.push_back({layer_name(i, "post_attention_layernorm_2.weight"), {h}});
    }
  }
  return out;
}

namespace {

// bind_ouro_weights; `packed(name)` is told when a tensor's bytes have been copied into a packed
// matrix and the source is no longer read (load_ouro_model gives its memory back then).
template <typename OnPacked>
Result<OuroWeights> bind(const io::Checkpoint& ckpt, const io::ModelConfig& c,
                         kernels::PackOptions pack, bool pack_linear, OnPacked packed) {
  RLT_RETURN_IF_ERROR(io::validate_tensor_set(ckpt, ouro_expected_tensors(c)));
  auto get = [&](const std::string& name) -> const io::TensorView& { return *ckpt.find(name); };
  using kernels::PackedMatrix;
  OuroWeights w;
  w.embed_tokens = matrix(get("model.embed_tokens.weight"));
  if (pack_linear) {
    const char* head = c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    w.lm_head = PackedMatrix::pack(matrix(get(head)), pack);
    packed(head);
  }
  w.final_norm = widen(get("model.norm.weight"));
  if (c.has_exit_gate()) {
    w.exit_gate_weight = widen(get("model.early_exit_gate.weight"));
    w.exit_gate_bias = widen(get("model.early_exit_gate.bias"))[0];
  }
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    OuroLayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto m = [&](const char* suffix) { return matrix(get(layer_name(i, suffix))); };
    if (pack_linear) {
      l.qkv = PackedMatrix::pack_concat({m("self_attn.q_proj.weight"), m("self_attn.k_proj.weight"),
                                         m("self_attn.v_proj.weight")},
                                        pack);
      l.o_proj = PackedMatrix::pack(m("self_attn.o_proj.weight"), pack);
      l.gate_up =
          PackedMatrix::pack_swiglu(m("mlp.gate_proj.weight"), m("mlp.up_proj.weight"), pack);
      l.down_proj = PackedMatrix::pack(m("mlp.down_proj.weight"), pack);
      for (const char* suffix : kLinearSuffixes) packed(layer_name(i, suffix));
    }
    l.input_norm = widen(get(layer_name(i, "input_layernorm.weight")));
    l.post_attn_norm = widen(get(layer_name(i, "post_attention_layernorm.weight")));
    if (c.sandwich_norms()) {
      l.attn_out_norm = widen(get(layer_name(i, "input_layernorm_2.weight")));
      l.mlp_out_norm = widen(get(layer_name(i, "post_attention_layernorm_2.weight")));
    }
  }
  return w;
}

}  // namespace

Result<OuroWeights> bind_ouro_weights(const io::Checkpoint& ckpt, const io::ModelConfig& c,
                                      kernels::PackOptions pack, bool pack_linear) {
  return bind(ckpt, c, pack, pack_linear, [](const std::string&) {});
}

std::vector<int64_t> OuroModel::eos_token_ids() const {
  return generation.eos_token_ids.empty() ? config.eos_token_ids : generation.eos_token_ids;
}

DType OuroModel::weight_dtype() const {
  std::map<DType, size_t> bytes;
  for (const auto& [_, t] : checkpoint.tensors())
    if (!t.quant) bytes[t.dtype] += t.nbytes;
  DType best = DType::kF32;
  size_t most = 0;
  for (const auto& [d, n] : bytes)
    if (n > most) most = n, best = d;
  return best;
}

std::string OuroModel::quantized_types() const {
  return io::quantized_types(checkpoint);
}

int64_t OuroModel::core_weight_bytes_per_loop() const {
  int64_t bytes = 0;
  for (const auto& l : weights.layers)
    bytes += l.qkv.bytes() + l.o_proj.bytes() + l.gate_up.bytes() + l.down_proj.bytes();
  if (bytes > 0) return bytes;
  for (int64_t i = 0; i < config.num_layers; ++i) {  // not packed: the checkpoint's tensors
    for (const char* suffix : kLinearSuffixes) {
      bytes += static_cast<int64_t>(checkpoint.find(layer_name(i, suffix))->nbytes);
    }
  }
  return bytes;
}

int64_t OuroModel::lm_head_bytes() const {
  if (weights.lm_head.bytes() > 0) return weights.lm_head.bytes();
  const char* name = config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  return static_cast<int64_t>(checkpoint.find(name)->nbytes);
}

LoadOptions load_options(const EngineConfig& c) {
  return LoadOptions{.bf16_activations = c.activation_dtype == ActivationDType::kBF16,
                     .int8_activations = c.activation_dtype == ActivationDType::kInt8,
                     .quantized = c.dtype,
                     .quantize = c.quantize};
}

io::QuantizedTensors quantized_tensors(WeightDType weights, bool for_cpu) {
  io::QuantizedTensors q(source::weight_dtype(weights));
  if (weights == WeightDType::kAuto && for_cpu) {
    for (quant::GgmlType t :
         {quant::GgmlType::kQ8_0, quant::GgmlType::kQ4_0, quant::GgmlType::kQ4_1,
          quant::GgmlType::kQ5_0, quant::GgmlType::kQ5_1, quant::GgmlType::kQ4_K,
          quant::GgmlType::kQ5_K, quant::GgmlType::kQ6_K}) {
      if (kernels::quant_panel_format(t)) q.keep.insert(t);
    }
  }
  return q;
}

namespace {

// --activation-dtype int8 applies to quantized weights on a CPU with the kernel; it is an explicit
// choice, so anything else is an error rather than a silent f32 run.
Status check_int8_activations(const OuroModel& model, const LoadOptions& options) {
  if (!options.pack_for_cpu) return Status::ok_status();  // the engine refuses GPU runs itself
  if (!kernels::linear_quant_int8_supported()) {
    return unimplemented(
        fmt::format("--activation-dtype int8 needs an x86 CPU with AVX2 (this one runs the {} "
                    "kernels); use --activation-dtype f32",
                    kernels::cpu_dispatch_target()));
  }
  const std::string types = model.quantized_types();
  if (types.empty()) {
    return invalid_argument(fmt::format(
        "--activation-dtype int8 applies to quantized weights, and {} stores {}: load a quantized "
        "GGUF file, add --quantize q8_0|q4_k|q6_k, or use --activation-dtype f32",
        model.dir, dtype_name(model.weight_dtype())));
  }
  return Status::ok_status();
}

}  // namespace

Result<std::shared_ptr<const OuroModel>> load_ouro_model(const std::string& path,
                                                         LoadOptions options) {
  RLT_ASSIGN_OR_RETURN(source::ModelSource source, source::ModelSource::open(path));
  return load_ouro_model(source, options);
}

Result<std::shared_ptr<const OuroModel>> load_ouro_model(const source::ModelSource& source,
                                                         LoadOptions options) {
  auto model = std::make_shared<OuroModel>();
  const std::string& dir = source.path();
  model->dir = dir;
  model->config = source.config();
  model->generation = source.generation();
  RLT_ASSIGN_OR_RETURN(model->checkpoint, source.open_checkpoint(quantized_tensors(
                                              options.quantized, options.pack_for_cpu)));
  if (options.quantize != QuantizeType::kNone) {
    if (source.format() == source::ModelFormat::kGguf) {
      return invalid_argument(fmt::format(
          "--quantize applies to safetensors checkpoints, and {} is a GGUF file: its quantized "
          "tensors are computed as stored (--dtype auto); drop --quantize",
          dir));
    }
    if (!options.pack_for_cpu) {
      return invalid_argument(
          "--quantize feeds the CPU's quantized kernels; GPU runs compute on the checkpoint's "
          "float weights: drop it with --device cuda");
    }
    if (options.bf16_activations) {
      return invalid_argument(
          "--quantize and --activation-dtype bf16 do not combine (bf16 activations need bf16 "
          "weights); choose one");
    }
    RLT_ASSIGN_OR_RETURN(model->checkpoint,
                         quantize_linear_weights(std::move(model->checkpoint), model->config,
                                                 options.quantize, &model->load_notes));
  }
  if (options.bf16_activations) {
    if (!kernels::bf16_dot_supported()) {
      return unimplemented(
          fmt::format("--activation-dtype bf16 needs a CPU with AVX512_BF16 (this one runs the {} "
                      "kernels); use --activation-dtype f32",
                      kernels::cpu_dispatch_target()));
    }
    if (const std::string q = model->quantized_types(); !q.empty()) {
      return invalid_argument(
          fmt::format("--activation-dtype bf16 applies to bf16 weights, and {} holds {} blocks "
                      "computed as stored; use --activation-dtype f32, or --dtype bf16 to "
                      "dequantize them",
                      dir, q));
    }
    if (model->weight_dtype() != DType::kBF16) {
      return invalid_argument(
          fmt::format("--activation-dtype bf16 applies to bf16 weights, and {} stores {}; use "
                      "--activation-dtype f32",
                      dir, dtype_name(model->weight_dtype())));
    }
  }
  if (options.int8_activations) RLT_RETURN_IF_ERROR(check_int8_activations(*model, options));
  // Each tensor's source memory goes back as soon as it is packed, so the weights are resident
  // once and loading peaks at the packed weights plus one layer's sources. The embedding stays
  // readable (token lookups read it in place; only the rows used come back).
  io::Checkpoint& ckpt = model->checkpoint;
  auto bound = bind(
      ckpt, model->config,
      {.bf16_activations = options.bf16_activations, .int8_activations = options.int8_activations},
      options.pack_for_cpu,
      [&](const std::string& name) { ckpt.release(name, name == "model.embed_tokens.weight"); });
  if (!bound.ok()) return bound.status().with_context(dir);
  model->weights = std::move(bound).value();
  return std::shared_ptr<const OuroModel>(std::move(model));
}

}  // namespace rlt::model
