#include "model/ouro_weights.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <map>

#include "common/half.h"
#include "common/process_memory.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "kernels/cpu/quant_panels.h"
#include "model/deferred_packing.h"
#include "model/demo_checkpoint.h"
#include "model/huginn_weights.h"
#include "model/packed_cache.h"
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

// The checkpoint tensor the lm head's matrix is packed from.
std::string linear_head_name(const io::ModelConfig& c) {
  return c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
}

// Gives a packed tensor's source memory back. The embedding stays readable (token lookups read
// it in place; only the rows used come back).
void release_source(io::Checkpoint& ckpt, const std::string& name) {
  ckpt.release(name, name == "model.embed_tokens.weight");
}

// Whether every linear weight is a bf16 / f16 tensor as stored in the checkpoint's mapping, which
// lives as long as the model: what computing from the rows in place needs.
bool linear_tensors_mapped_16bit(const io::Checkpoint& ckpt, const io::ModelConfig& c) {
  auto mapped = [&](const std::string& name) {
    const io::TensorView* t = ckpt.find(name);
    return t != nullptr && t->mapping && t->data != nullptr && !t->owner && !t->convert &&
           !t->quant && (t->dtype == DType::kBF16 || t->dtype == DType::kF16);
  };
  if (!mapped(linear_head_name(c))) return false;
  for (int64_t i = 0; i < c.num_layers; ++i)
    for (const char* suffix : kLinearSuffixes)
      if (!mapped(layer_name(i, suffix))) return false;
  return true;
}

}  // namespace

std::vector<float> widen_to_f32(const io::TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  kernels::WeightMatrix m{t.dtype, 1, t.numel(), t.data};
  m.row_to_f32(0, out.data());
  return out;
}

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

std::vector<io::ExpectedTensor> expected_tensors(const io::ModelConfig& c, const io::Checkpoint& ckpt) {
  return c.recurrent_injection() ? huginn_expected_tensors(c, &ckpt) : ouro_expected_tensors(c);
}

namespace {

// The weights every run reads as they are: the embedding (in place), the norms and the exit
// gate (widened to f32); the linear layers stay empty. `needed(name)` is asked for a tensor's
// bytes just before they are read (a deferred conversion runs then: io::Checkpoint::materialize).
template <typename OnNeeded>
Result<OuroWeights> bind_vectors(const io::Checkpoint& ckpt, const io::ModelConfig& c,
                                 OnNeeded needed) {
  RLT_RETURN_IF_ERROR(io::validate_tensor_set(ckpt, ouro_expected_tensors(c)));
  auto get = [&](const std::string& name) -> const io::TensorView& { return *ckpt.find(name); };
  OuroWeights w;
  RLT_RETURN_IF_ERROR(needed("model.embed_tokens.weight"));
  RLT_RETURN_IF_ERROR(needed("model.norm.weight"));
  w.embed_tokens = matrix(get("model.embed_tokens.weight"));
  w.final_norm = widen_to_f32(get("model.norm.weight"));
  if (c.has_exit_gate()) {
    RLT_RETURN_IF_ERROR(needed("model.early_exit_gate.weight"));
    RLT_RETURN_IF_ERROR(needed("model.early_exit_gate.bias"));
    w.exit_gate_weight = widen_to_f32(get("model.early_exit_gate.weight"));
    w.exit_gate_bias = widen_to_f32(get("model.early_exit_gate.bias"))[0];
  }
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    OuroLayerWeights& l = w.layers[static_cast<size_t>(i)];
    for (const char* norm : {"input_layernorm.weight", "post_attention_layernorm.weight",
                             "input_layernorm_2.weight", "post_attention_layernorm_2.weight"}) {
      if (ckpt.find(layer_name(i, norm)) != nullptr)
        RLT_RETURN_IF_ERROR(needed(layer_name(i, norm)));
    }
    l.input_norm = widen_to_f32(get(layer_name(i, "input_layernorm.weight")));
    l.post_attn_norm = widen_to_f32(get(layer_name(i, "post_attention_layernorm.weight")));
    if (c.sandwich_norms()) {
      l.attn_out_norm = widen_to_f32(get(layer_name(i, "input_layernorm_2.weight")));
      l.mlp_out_norm = widen_to_f32(get(layer_name(i, "post_attention_layernorm_2.weight")));
    }
  }
  return w;
}

// Packs the lm head and each layer's linear layers into `w` (bound by bind_vectors), layer by
// layer. `needed` as above; `packed(name)` is told when a tensor's bytes have been copied into a
// packed matrix and are not read again (load_ouro_model gives their memory back then): loading
// converts and holds one layer's sources at a time.
template <typename OnNeeded, typename OnPacked>
Status pack_linear(OuroWeights& w, const io::Checkpoint& ckpt, const io::ModelConfig& c,
                   kernels::PackOptions pack, OnNeeded needed, OnPacked packed) {
  using kernels::PackedMatrix;
  auto get = [&](const std::string& name) { return matrix(*ckpt.find(name)); };
  const std::string head = linear_head_name(c);
  RLT_RETURN_IF_ERROR(needed(head));
  w.lm_head = PackedMatrix::pack(get(head), pack);
  packed(head);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    OuroLayerWeights& l = w.layers[static_cast<size_t>(i)];
    auto m = [&](const char* suffix) { return get(layer_name(i, suffix)); };
    for (const char* suffix : kLinearSuffixes) RLT_RETURN_IF_ERROR(needed(layer_name(i, suffix)));
    l.qkv = PackedMatrix::pack_concat(
        {m("self_attn.q_proj.weight"), m("self_attn.k_proj.weight"), m("self_attn.v_proj.weight")},
        pack);
    l.o_proj = PackedMatrix::pack(m("self_attn.o_proj.weight"), pack);
    l.gate_up = PackedMatrix::pack_swiglu(m("mlp.gate_proj.weight"), m("mlp.up_proj.weight"), pack);
    l.down_proj = PackedMatrix::pack(m("mlp.down_proj.weight"), pack);
    for (const char* suffix : kLinearSuffixes) packed(layer_name(i, suffix));
  }
  return Status::ok_status();
}

}  // namespace

Result<OuroWeights> bind_ouro_weights(const io::Checkpoint& ckpt, const io::ModelConfig& c,
                                      kernels::PackOptions pack, bool pack_linear_layers) {
  auto present = [](const std::string&) { return Status::ok_status(); };
  RLT_ASSIGN_OR_RETURN(OuroWeights w, bind_vectors(ckpt, c, present));
  if (pack_linear_layers)
    RLT_RETURN_IF_ERROR(pack_linear(w, ckpt, c, pack, present, [](const std::string&) {}));
  return w;
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
  int64_t bytes = weights.adapter.bytes();
  for (const auto& l : weights.layers) bytes += l.linear_bytes();
  if (bytes > 0 || config.recurrent_injection()) return bytes;
  for (int64_t i = 0; i < config.num_layers; ++i) {  // not packed: the checkpoint's tensors
    for (const char* suffix : kLinearSuffixes) {
      bytes += static_cast<int64_t>(checkpoint.find(layer_name(i, suffix))->nbytes);
    }
  }
  return bytes;
}

int64_t OuroModel::lm_head_bytes() const {
  if (weights.lm_head.bytes() > 0 || config.recurrent_injection()) return weights.lm_head.bytes();
  return static_cast<int64_t>(checkpoint.find(linear_head_name(config))->nbytes);
}

int64_t OuroModel::outer_block_bytes() const {
  int64_t bytes = 0;
  for (const auto* group : {&weights.prelude, &weights.coda})
    for (const auto& l : *group) bytes += l.linear_bytes();
  return bytes;
}

LoadOptions load_options(const EngineConfig& c) {
  return LoadOptions{.bf16_activations = c.activation_dtype == ActivationDType::kBF16,
                     .int8_activations = c.activation_dtype == ActivationDType::kInt8,
                     .quantized = c.dtype,
                     .quantize = c.quantize,
                     .packed_cache_dir = c.packed_cache_dir};
}

std::string LoadReport::summary() const {
  std::string cache_text = cache;
  if (!cache_path.empty() && cache != "off") cache_text += " " + cache_path;
  if (!cache_note.empty()) cache_text += " (" + cache_note + ")";
  return fmt::format(
      "{:.2f} s (open {:.2f} s, pack {:.2f} s, cache {:.2f} s); {:.1f} MiB of packed "
      "weights{}; packed-weight cache: {}",
      open_seconds + pack_seconds + cache_seconds, open_seconds, pack_seconds, cache_seconds,
      static_cast<double>(packed_bytes) / (1 << 20),
      packing_deferred ? " (packed between steps; computed from the checkpoint until then)" : "",
      cache_text);
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
        fmt::format("--activation-dtype int8 needs an x86 CPU with AVX2 or an AArch64 CPU (this "
                    "one runs the {} kernels); use --activation-dtype f32",
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

// Seconds since construction or since the last lap.
class Stopwatch {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// The load options that change the packed bytes (part of the packed-weight cache's key).
std::string cache_options_json(const LoadOptions& o) {
  return fmt::format(
      R"({{"bf16_activations":{},"int8_activations":{},"dtype":"{}","quantize":"{}"}})",
      o.bf16_activations, o.int8_activations, name(o.quantized), name(o.quantize));
}

// The packed matrices of a model with the shapes its config gives them, in a fixed order.
std::vector<PackedSlot> packed_slots(OuroWeights& w, const io::ModelConfig& c) {
  using Epilogue = kernels::PackedMatrix::Epilogue;
  std::vector<PackedSlot> slots = {{"lm_head", &w.lm_head, c.vocab_size, c.hidden_size}};
  for (size_t i = 0; i < w.layers.size(); ++i) {
    OuroLayerWeights& l = w.layers[i];
    const std::string p = fmt::format("layers.{}.", i);
    slots.push_back({p + "qkv", &l.qkv, c.q_dim() + 2 * c.kv_dim(), c.hidden_size});
    slots.push_back({p + "o_proj", &l.o_proj, c.hidden_size, c.q_dim()});
    slots.push_back(
        {p + "gate_up", &l.gate_up, c.intermediate_size, c.hidden_size, Epilogue::kSwiGLU});
    slots.push_back({p + "down_proj", &l.down_proj, c.hidden_size, c.intermediate_size});
  }
  return slots;
}

// Loading needs the packed weights, the converted tensors that are not packed, the KV pools the
// caller will allocate (LoadOptions::other_bytes) and, while packing, one layer's sources. A
// model that cannot have them fails here, with the numbers, and not later by the kernel's OOM
// killer halfway through loading.
Status check_fits(const io::Checkpoint& described, const io::ModelConfig& c,
                  const LoadOptions& options) {
  const std::optional<int64_t> available = available_memory();
  if (!available) return Status::ok_status();
  int64_t weights = 0, largest_layer = 0;
  for (const io::ExpectedTensor& t : expected_tensors(c, described)) {
    const io::TensorView* v = described.find(t.name);
    if (v == nullptr) continue;  // the tensor-set check reports it
    const bool mapped_only = t.name == "model.embed_tokens.weight" && !c.tie_word_embeddings;
    if (!mapped_only) weights += static_cast<int64_t>(v->nbytes);
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    int64_t layer = 0;
    for (const char* suffix : kLinearSuffixes)
      if (const io::TensorView* v = described.find(layer_name(i, suffix)))
        layer += static_cast<int64_t>(v->nbytes);
    largest_layer = std::max(largest_layer, layer);
  }
  const int64_t needed = weights + options.other_bytes + largest_layer;
  if (needed <= *available) return Status::ok_status();
  return resource_exhausted(fmt::format(
      "the model does not fit in memory: it needs about {} (weights {}, KV cache {}, {} of staging "
      "while packing) and {} is available (MemAvailable, or what the cgroup's memory.max leaves); "
      "use a smaller --kv-cache-gib, a quantized model (--quantize q4_k, or a Q4_K_M GGUF), or a "
      "machine with more memory",
      format_bytes(needed), format_bytes(weights), format_bytes(options.other_bytes),
      format_bytes(largest_layer), format_bytes(*available)));
}

int64_t packed_bytes(const OuroWeights& w) {
  int64_t n = w.lm_head.bytes() + w.adapter.bytes();
  for (const auto* group : {&w.prelude, &w.layers, &w.coda})
    for (const auto& l : *group) n += l.linear_bytes();
  return n;
}

// --activation-dtype bf16 needs bf16 weights and a CPU with the bf16 dot product; it is an explicit
// choice, so anything else is an error rather than a silent f32 run.
Status check_bf16_activations(const OuroModel& model) {
  const std::string& dir = model.dir;
  if (!kernels::bf16_dot_supported()) {
    return unimplemented(
        fmt::format("--activation-dtype bf16 needs a CPU with AVX512_BF16 (this one runs the {} "
                    "kernels); use --activation-dtype f32",
                    kernels::cpu_dispatch_target()));
  }
  if (const std::string q = model.quantized_types(); !q.empty()) {
    return invalid_argument(
        fmt::format("--activation-dtype bf16 applies to bf16 weights, and {} holds {} blocks "
                    "computed as stored; use --activation-dtype f32, or --dtype bf16 to "
                    "dequantize them",
                    dir, q));
  }
  if (model.weight_dtype() != DType::kBF16) {
    return invalid_argument(
        fmt::format("--activation-dtype bf16 applies to bf16 weights, and {} stores {}; use "
                    "--activation-dtype f32",
                    dir, dtype_name(model.weight_dtype())));
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
  Stopwatch clock;
  auto model = std::make_shared<OuroModel>();
  LoadReport& report = model->load_report;
  const std::string& dir = source.path();
  model->dir = dir;
  model->config = source.config();
  model->generation = source.generation();
  // CPU runs convert GGUF tensors (dequantization, row reordering) a layer at a time as they
  // pack; GPU runs upload whole tensors and convert them here.
  RLT_ASSIGN_OR_RETURN(
      model->checkpoint,
      source.open_checkpoint(quantized_tensors(options.quantized, options.pack_for_cpu),
                             /*deferred=*/options.pack_for_cpu));
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
  }
  if (options.bf16_activations) RLT_RETURN_IF_ERROR(check_bf16_activations(*model));
  const kernels::PackOptions pack{.bf16_activations = options.bf16_activations,
                                  .int8_activations = options.int8_activations};
  if (model->config.recurrent_injection()) {
    // Huginn: float safetensors packed as they are (no quantization, no packed-weight cache).
    if (options.quantize != QuantizeType::kNone || options.int8_activations) {
      return invalid_argument(fmt::format(
          "{}: Huginn runs on float weights; drop --quantize and --activation-dtype int8", dir));
    }
    if (options.pack_for_cpu) RLT_RETURN_IF_ERROR(check_fits(model->checkpoint, model->config, options));
    auto bound = bind_huginn_weights(model->checkpoint, model->config, pack, options.pack_for_cpu);
    if (!bound.ok()) return bound.status().with_context(dir);
    model->weights = std::move(bound).value();
    report.open_seconds = clock.lap();
    report.packed_bytes = packed_bytes(model->weights);
    return std::shared_ptr<const OuroModel>(std::move(model));
  }

  // --quantize deferred like the conversions: each matrix is quantized as its layer is packed,
  // and a load that maps the packed-weight cache never quantizes.
  io::Checkpoint& ckpt = model->checkpoint;
  if (options.quantize != QuantizeType::kNone) {
    RLT_ASSIGN_OR_RETURN(ckpt, quantize_linear_weights(std::move(ckpt), model->config,
                                                       options.quantize, &model->load_notes));
  }
  auto materialize = [&](const std::string& name) { return ckpt.materialize(name); };
  auto bound = bind_vectors(ckpt, model->config, materialize);
  if (!bound.ok()) return bound.status().with_context(dir);
  const bool use_cache = !options.packed_cache_dir.empty() && options.pack_for_cpu;
  PackedCacheKey key;
  if (use_cache) {
    std::vector<std::string> files = model->checkpoint.files();
    if (source.format() == source::ModelFormat::kHuggingFaceFolder)
      files.push_back((std::filesystem::path(dir) / "config.json").string());
    std::string cache_dir = options.packed_cache_dir;
    if (cache_dir == "auto") {
      RLT_ASSIGN_OR_RETURN(std::string root, rlt_cache_dir());
      cache_dir = (std::filesystem::path(root) / "packed").string();
    }
    RLT_ASSIGN_OR_RETURN(key, packed_cache_key(cache_dir, dir, files, cache_options_json(options)));
    report.cache_path = key.path;
    report.open_seconds = clock.lap();
    Status read = read_packed_cache(key, packed_slots(*bound, model->config));
    report.cache_seconds = clock.lap();
    if (read.ok()) {
      report.cache = "hit";
      model->weights = std::move(bound).value();
      if (options.int8_activations) RLT_RETURN_IF_ERROR(check_int8_activations(*model, options));
      report.packed_bytes = packed_bytes(model->weights);
      return std::shared_ptr<const OuroModel>(std::move(model));
    }
    if (read.code() != ErrorCode::kNotFound) {
      report.cache = "rebuilt";
      report.cache_note = read.message();
    }
  }

  if (options.pack_for_cpu) RLT_RETURN_IF_ERROR(check_fits(ckpt, model->config, options));
  if (options.int8_activations) RLT_RETURN_IF_ERROR(check_int8_activations(*model, options));
  report.open_seconds += clock.lap();
  // A cache written before returning needs the packed bytes now: no deferring then.
  const bool deferred = options.pack_for_cpu && options.defer_packing &&
                        (!use_cache || options.write_cache_in_background) &&
                        !options.bf16_activations && options.quantize == QuantizeType::kNone &&
                        linear_tensors_mapped_16bit(ckpt, model->config);
  // Each tensor's source memory goes back as soon as it is packed (deferred: by the steps), so the
  // weights are resident once and loading peaks at the packed weights plus one layer's sources.
  if (options.pack_for_cpu) {
    kernels::PackOptions p = pack;
    p.rows_in_place = deferred;
    Status packed = pack_linear(*bound, ckpt, model->config, p, materialize,
                                [&](const std::string& name) {
                                  if (!deferred) release_source(ckpt, name);
                                });
    if (!packed.ok()) return packed.with_context(dir);
    if (!deferred) ckpt.release_mappings();
  }
  model->weights = std::move(bound).value();
  report.pack_seconds = clock.lap();
  report.packed_bytes = packed_bytes(model->weights);
  if (deferred) {
    report.packing_deferred = true;
    if (use_cache) report.cache = "writing";
    std::optional<PackedCacheKey> cache;
    if (use_cache) cache = key;
    const io::ModelConfig& c = model->config;
    std::vector<DeferredPacking::Step> steps;
    steps.push_back({{&model->weights.lm_head}, {linear_head_name(c)}});
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const OuroLayerWeights& l = model->weights.layers[static_cast<size_t>(i)];
      DeferredPacking::Step step{{&l.qkv, &l.o_proj, &l.gate_up, &l.down_proj}, {}};
      for (const char* suffix : kLinearSuffixes) step.sources.push_back(layer_name(i, suffix));
      steps.push_back(std::move(step));
    }
    io::Checkpoint* checkpoint = &model->checkpoint;
    model->deferred_packing = std::make_shared<DeferredPacking>(
        std::move(steps), [checkpoint](const std::string& name) { release_source(*checkpoint, name); },
        // Pages the passes mapped back in while layers were pending (fault-around, boundaries).
        [checkpoint] { checkpoint->release_mappings(); }, std::move(cache),
        packed_slots(model->weights, model->config));
    return std::shared_ptr<const OuroModel>(std::move(model));
  }
  if (use_cache && options.write_cache_in_background) {
    model->cache_write =
        std::make_shared<BackgroundCacheWrite>(key, packed_slots(model->weights, model->config));
    report.cache = "writing";
  } else if (use_cache) {
    Status written = write_packed_cache(key, packed_slots(model->weights, model->config));
    report.cache_seconds += clock.lap();
    if (!written.ok()) {
      report.cache = "not written";
      report.cache_note = written.message();
    } else if (report.cache == "off") {
      report.cache = "written";
    }
  }
  return std::shared_ptr<const OuroModel>(std::move(model));
}

}  // namespace rlt::model
