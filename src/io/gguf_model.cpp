#include "io/gguf_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "common/half.h"
#include "quant/dequantize.h"

namespace rlt::io {
namespace {

// Keys under "<arch>." that rlt reads. Any other key of the architecture may change the math (a
// sliding window, experts, an attention scale) and is refused rather than ignored.
const std::set<std::string>& known_arch_keys(Architecture arch) {
  static const std::set<std::string> kLlama = {"context_length",
                                               "embedding_length",
                                               "block_count",
                                               "feed_forward_length",
                                               "attention.head_count",
                                               "attention.head_count_kv",
                                               "attention.layer_norm_rms_epsilon",
                                               "attention.key_length",
                                               "attention.value_length",
                                               "rope.dimension_count",
                                               "rope.freq_base",
                                               "rope.scaling.type",
                                               "rope.scaling.factor",
                                               "rope.scaling.original_context_length",
                                               "rope.scaling.finetuned",
                                               "vocab_size",
                                               "expert_count",
                                               "expert_used_count"};
  static const std::set<std::string> kOuro = [] {
    std::set<std::string> k = kLlama;
    // llama.cpp's converter writes num_loops and skip_loop_final_norm; rlt's own GGUF adds the
    // exit threshold next to the exit gate tensors.
    k.insert({"num_loops", "skip_loop_final_norm", "early_exit_threshold"});
    return k;
  }();
  // llama.cpp's nanbeige: block_count counts the physical layers, num_loops the passes.
  static const std::set<std::string> kNanbeige = [] {
    std::set<std::string> k = kLlama;
    k.insert({"num_loops", "skip_loop_final_norm"});
    return k;
  }();
  switch (arch) {
    case Architecture::kOuro:
      return kOuro;
    case Architecture::kNanbeige:
      return kNanbeige;
    case Architecture::kLlama:
    case Architecture::kHuginn:  // no GGUF form: never read from a GGUF file
      break;
  }
  return kLlama;
}

// GGUF tensor names -> Hugging Face names (llama.cpp's tensor_mapping.py, Ouro's four norms as
// its converter maps them).
const std::map<std::string, std::string>& global_names() {
  static const std::map<std::string, std::string> k = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"exit_gate.weight", "model.early_exit_gate.weight"},
      {"exit_gate.bias", "model.early_exit_gate.bias"},
  };
  return k;
}
const std::map<std::string, std::string>& layer_names(bool ouro) {
  static const std::map<std::string, std::string> kLlama = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  static const std::map<std::string, std::string> kOuro = [] {
    auto k = kLlama;
    k["post_attention_norm.weight"] = "input_layernorm_2.weight";
    k["post_ffw_norm.weight"] = "post_attention_layernorm_2.weight";
    return k;
  }();
  return ouro ? kOuro : kLlama;
}

// The Hugging Face name of a GGUF tensor; the GGUF name itself when it has none (the tensor set
// check then reports it as unexpected).
std::string hf_name(const std::string& gguf_name, bool ouro) {
  if (auto it = global_names().find(gguf_name); it != global_names().end()) return it->second;
  if (gguf_name.rfind("blk.", 0) == 0) {
    const size_t dot = gguf_name.find('.', 4);
    if (dot != std::string::npos && dot > 4 &&
        std::all_of(gguf_name.begin() + 4, gguf_name.begin() + static_cast<int64_t>(dot),
                    [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const std::string layer = gguf_name.substr(4, dot - 4);
      const auto& names = layer_names(ouro);
      if (auto it = names.find(gguf_name.substr(dot + 1)); it != names.end())
        return fmt::format("model.layers.{}.{}", layer, it->second);
    }
  }
  return gguf_name;
}

// HF pairs i, i + d/2; GGUF pairs 2i, 2i + 1 (gguf_interleaved_row).
int64_t interleaved_row(int64_t row, int64_t head_dim) {
  return gguf_interleaved_row(row, head_dim);
}

Result<int64_t> required_int(const GgufFile& f, const std::string& key) {
  RLT_ASSIGN_OR_RETURN(auto v, f.get_int(key));
  if (!v) return invalid_argument(fmt::format("{}: metadata key '{}' is required", f.path(), key));
  if (*v <= 0)
    return invalid_argument(
        fmt::format("{}: metadata key '{}' must be positive, got {}", f.path(), key, *v));
  return *v;
}

Result<int64_t> optional_int(const GgufFile& f, const std::string& key, int64_t fallback) {
  RLT_ASSIGN_OR_RETURN(auto v, f.get_int(key));
  if (!v) return fallback;
  if (*v <= 0)
    return invalid_argument(
        fmt::format("{}: metadata key '{}' must be positive, got {}", f.path(), key, *v));
  return *v;
}

// The loop keys llama.cpp's looped architectures share: `num_loops` (the passes over the
// block_count physical layers) and `skip_loop_final_norm` (only false: output_norm after every
// loop, as Ouro and the released Nanbeige4.2 compute).
Result<int64_t> loop_count(const GgufFile& f, const std::string& p, bool required) {
  int64_t loops = 1;
  if (required) {
    RLT_ASSIGN_OR_RETURN(loops, required_int(f, p + "num_loops"));
  } else {
    RLT_ASSIGN_OR_RETURN(loops, optional_int(f, p + "num_loops", 1));
  }
  RLT_ASSIGN_OR_RETURN(auto skip, f.get_bool(p + "skip_loop_final_norm"));
  if (skip && *skip) {
    return unimplemented(fmt::format(
        "{}: {}skip_loop_final_norm = true (no norm between loops) is not supported: rlt applies "
        "output_norm after every loop, as Ouro and the released Nanbeige4.2 checkpoints do",
        f.path(), p));
  }
  return loops;
}

Status token_id(const GgufFile& f, const std::string& key, int64_t vocab,
                std::optional<int64_t>* out) {
  RLT_ASSIGN_OR_RETURN(auto v, f.get_int(key));
  if (!v) return {};
  if (*v < 0 || *v >= vocab)
    return invalid_argument(fmt::format("{}: {} = {} is outside the vocabulary of {} tokens",
                                        f.path(), key, *v, vocab));
  *out = *v;
  return {};
}

}  // namespace

int64_t gguf_interleaved_row(int64_t row, int64_t head_dim) {
  const int64_t head = row / head_dim, r = row % head_dim, half = head_dim / 2;
  return head * head_dim + 2 * (r % half) + r / half;
}

std::optional<std::string> gguf_tensor_name(const std::string& hf, bool ouro) {
  for (const auto& [gguf, name] : global_names())
    if (name == hf) return gguf;
  constexpr std::string_view kLayers = "model.layers.";
  if (hf.rfind(kLayers, 0) != 0) return std::nullopt;
  const size_t dot = hf.find('.', kLayers.size());
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = hf.substr(kLayers.size(), dot - kLayers.size()),
                    rest = hf.substr(dot + 1);
  for (const auto& [gguf, name] : layer_names(ouro))
    if (name == rest) return fmt::format("blk.{}.{}", layer, gguf);
  return std::nullopt;
}

Result<GgufModelInfo> read_gguf_model_info(const GgufFile& f) {
  const std::string& path = f.path();
  RLT_ASSIGN_OR_RETURN(auto arch_opt, f.get_string("general.architecture"));
  if (!arch_opt)
    return invalid_argument(
        fmt::format("{}: metadata key 'general.architecture' is required", path));
  const std::string arch = *arch_opt;
  if (arch != "llama" && arch != "ouro" && arch != "nanbeige") {
    return unimplemented(fmt::format(
        "{}: architecture '{}' is not one rlt runs (accepted: llama, ouro, nanbeige)", path, arch));
  }
  const bool ouro = arch == "ouro";
  const Architecture architecture = ouro                ? Architecture::kOuro
                                    : arch == "nanbeige" ? Architecture::kNanbeige
                                                         : Architecture::kLlama;
  const std::string p = arch + ".";
  std::vector<std::string> unknown;
  for (const auto& [key, _] : f.metadata())
    if (key.rfind(p, 0) == 0 && !known_arch_keys(architecture).count(key.substr(p.size())))
      unknown.push_back(key);
  if (!unknown.empty()) {
    return unimplemented(
        fmt::format("{}: metadata key{} '{}' of architecture {} {} not understood by rlt, and may "
                    "change the model's math; rlt refuses rather than ignore {}",
                    path, unknown.size() > 1 ? "s" : "", fmt::join(unknown, "', '"), arch,
                    unknown.size() > 1 ? "are" : "is", unknown.size() > 1 ? "them" : "it"));
  }
  GgufModelInfo info;
  ModelConfig& c = info.config;
  c.model_type = arch;
  c.architecture = architecture;
  RLT_ASSIGN_OR_RETURN(c.hidden_size, required_int(f, p + "embedding_length"));
  RLT_ASSIGN_OR_RETURN(c.intermediate_size, required_int(f, p + "feed_forward_length"));
  RLT_ASSIGN_OR_RETURN(c.num_layers, required_int(f, p + "block_count"));
  RLT_ASSIGN_OR_RETURN(c.num_heads, required_int(f, p + "attention.head_count"));
  RLT_ASSIGN_OR_RETURN(c.num_kv_heads, optional_int(f, p + "attention.head_count_kv", c.num_heads));
  RLT_ASSIGN_OR_RETURN(c.max_position_embeddings, required_int(f, p + "context_length"));
  if (c.hidden_size % c.num_heads != 0 && !f.find(p + "attention.key_length"))
    return invalid_argument(
        fmt::format("{}: {}embedding_length {} is not divisible by the {} heads and no "
                    "attention.key_length is given",
                    path, p, c.hidden_size, c.num_heads));
  RLT_ASSIGN_OR_RETURN(c.head_dim,
                       optional_int(f, p + "attention.key_length", c.hidden_size / c.num_heads));
  RLT_ASSIGN_OR_RETURN(int64_t value_dim,
                       optional_int(f, p + "attention.value_length", c.head_dim));
  RLT_ASSIGN_OR_RETURN(int64_t rope_dims, optional_int(f, p + "rope.dimension_count", c.head_dim));
  if (value_dim != c.head_dim)
    return unimplemented(fmt::format("{}: value heads of {} dimensions differ from key heads of {}",
                                     path, value_dim, c.head_dim));
  if (rope_dims != c.head_dim) {
    return unimplemented(
        fmt::format("{}: RoPE on {} of each head's {} dimensions (partial rotary) is not "
                    "supported",
                    path, rope_dims, c.head_dim));
  }
  RLT_RETURN_IF_ERROR(check_config_limits(c, path));
  if (c.num_heads % c.num_kv_heads != 0 || c.head_dim % 2 != 0) {
    return invalid_argument(fmt::format(
        "{}: {} query heads, {} KV heads of {} dimensions: the KV heads must divide the "
        "query heads and the head size must be even",
        path, c.num_heads, c.num_kv_heads, c.head_dim));
  }
  RLT_ASSIGN_OR_RETURN(auto eps, f.get_float(p + "attention.layer_norm_rms_epsilon"));
  if (!eps || !(*eps > 0))
    return invalid_argument(
        fmt::format("{}: metadata key '{}attention.layer_norm_rms_epsilon' must be a positive "
                    "number",
                    path, p));
  c.rms_norm_eps = *eps;
  RLT_ASSIGN_OR_RETURN(auto theta, f.get_float(p + "rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0);
  if (!(c.rope_theta > 0))
    return invalid_argument(fmt::format("{}: {}rope.freq_base must be positive", path, p));
  RLT_ASSIGN_OR_RETURN(auto scaling, f.get_string(p + "rope.scaling.type"));
  if (scaling && *scaling == "linear") {
    RLT_ASSIGN_OR_RETURN(auto factor, f.get_float(p + "rope.scaling.factor"));
    if (!factor || !(*factor > 0))
      return invalid_argument(
          fmt::format("{}: linear RoPE scaling needs a positive {}rope.scaling.factor", path, p));
    c.rope_scaling.kind = RopeScaling::Kind::kLinear;
    c.rope_scaling.factor = *factor;
  } else if (scaling && *scaling != "none") {
    return unimplemented(
        fmt::format("{}: RoPE scaling '{}' is not supported (accepted: none, linear, and "
                    "rope_freqs.weight factors)",
                    path, *scaling));
  }
  if (const GgufTensor* freqs = f.find_tensor("rope_freqs.weight")) {
    if (freqs->type != quant::GgmlType::kF32 || freqs->numel() != c.head_dim / 2)
      return invalid_argument(
          fmt::format("{}: rope_freqs.weight must hold {} F32 factors", path, c.head_dim / 2));
    if (c.rope_scaling.kind != RopeScaling::Kind::kNone)
      return invalid_argument(
          fmt::format("{}: both {}rope.scaling.type and rope_freqs.weight are given", path, p));
    c.rope_scaling.kind = RopeScaling::Kind::kFrequencyFactors;
    c.rope_scaling.frequency_factors.resize(static_cast<size_t>(c.head_dim / 2));
    RLT_RETURN_IF_ERROR(quant::dequantize_row(quant::GgmlType::kF32, freqs->data, freqs->numel(),
                                              c.rope_scaling.frequency_factors.data()));
    for (float factor : c.rope_scaling.frequency_factors) {
      if (!(factor > 0.0f) || !std::isfinite(factor))
        return invalid_argument(
            fmt::format("{}: rope_freqs.weight holds {}; every factor must be finite and positive",
                        path, factor));
    }
  }
  RLT_ASSIGN_OR_RETURN(auto experts, f.get_int(p + "expert_count"));
  if (experts && *experts > 0)
    return unimplemented(
        fmt::format("{}: a mixture of {} experts; rlt runs dense models", path, *experts));
  const GgufTensor* embed = f.find_tensor("token_embd.weight");
  if (!embed || embed->ne.size() != 2)
    return invalid_argument(
        fmt::format("{}: the 2-D tensor 'token_embd.weight' is required", path));
  RLT_ASSIGN_OR_RETURN(c.vocab_size, optional_int(f, p + "vocab_size", embed->ne[1]));
  if (c.num_layers > static_cast<int64_t>(f.tensors().size()))
    return invalid_argument(
        fmt::format("{}: {}block_count is {} but the file holds only {} tensors", path, p,
                    c.num_layers, f.tensors().size()));
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  if (ouro) {
    if (c.tie_word_embeddings)
      info.notes.push_back("no output.weight: the lm head is tied to the embedding");
    RLT_ASSIGN_OR_RETURN(c.total_ut_steps, loop_count(f, p, /*required=*/false));
    RLT_ASSIGN_OR_RETURN(auto threshold, f.get_float(p + "early_exit_threshold"));
    c.early_exit_threshold = threshold.value_or(1.0);
    if (c.early_exit_threshold < 0 || c.early_exit_threshold > 1)
      return invalid_argument(fmt::format("{}: {}early_exit_threshold must be in [0, 1]", path, p));
    c.exit_gate =
        f.find_tensor("exit_gate.weight") != nullptr || f.find_tensor("exit_gate.bias") != nullptr;
    if (!c.exit_gate) {
      info.notes.push_back(fmt::format(
          "no exit gate (llama.cpp's converter drops it): every token runs all {} loops "
          "and exit thresholds have no effect",
          c.total_ut_steps));
    }
  } else if (architecture == Architecture::kNanbeige) {
    // Without num_loops a Nanbeige file would silently run its stack once.
    RLT_ASSIGN_OR_RETURN(c.total_ut_steps, loop_count(f, p, /*required=*/true));
    c.exit_gate = false;
  } else {
    c.total_ut_steps = 1;
  }
  RLT_RETURN_IF_ERROR(check_config_limits(c, path));  // again, with the loop count and vocabulary
  RLT_RETURN_IF_ERROR(token_id(f, "tokenizer.ggml.bos_token_id", c.vocab_size, &c.bos_token_id));
  RLT_RETURN_IF_ERROR(
      token_id(f, "tokenizer.ggml.padding_token_id", c.vocab_size, &c.pad_token_id));
  // llama.cpp ends generation at eos, eot (end of turn) and eom (end of message).
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    std::optional<int64_t> id;
    RLT_RETURN_IF_ERROR(token_id(f, key, c.vocab_size, &id));
    if (id &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*id);
  }
  info.generation.bos_token_id = c.bos_token_id;
  info.generation.eos_token_ids = c.eos_token_ids;
  return info;
}

namespace {

// How one GGUF tensor becomes a checkpoint tensor.
struct PlannedTensor {
  TensorView view;  // name, target dtype, shape and byte size; data unset until materialized
  const GgufTensor* source = nullptr;
  bool in_place = false;     // a float tensor used as stored, straight from the mapping
  bool interleaved = false;  // Q/K rows to put back in Hugging Face order
};

Result<std::vector<PlannedTensor>> plan(const GgufFile& file, const ModelConfig& config,
                                        const QuantizedTensors& quantized) {
  const DType matrix_dtype = quantized.matrix_dtype;
  if (!is_weight_float(matrix_dtype))
    return invalid_argument(fmt::format("weights cannot be held as {}", dtype_name(matrix_dtype)));
  const bool ouro = config.architecture == Architecture::kOuro;
  std::vector<PlannedTensor> out;
  for (const GgufTensor& t : file.tensors()) {
    if (t.name == "rope_freqs.weight") continue;  // read into the config's RoPE scaling
    const auto info = quant::ggml_type_info(static_cast<uint32_t>(t.type));
    if (!info->dequantizable) {
      return unimplemented(
          fmt::format("{}: tensor '{}' is stored as {}, which rlt cannot compute with (supported: "
                      "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K)",
                      file.path(), t.name, info->name));
    }
    PlannedTensor p;
    p.source = &t;
    p.view.name = hf_name(t.name, ouro);
    p.view.shape = t.shape();
    p.view.file = fmt::format("{} ('{}', {})", file.path(), t.name, info->name);
    p.interleaved = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_k.weight");
    if (p.interleaved && (t.ne.size() != 2 || t.rows() % config.head_dim != 0)) {
      return invalid_argument(
          fmt::format("{}: tensor '{}' has shape {}, not whole heads of {} rows", file.path(),
                      t.name, t.shape_string(), config.head_dim));
    }
    const bool stored_float = t.type == quant::GgmlType::kF32 || t.type == quant::GgmlType::kF16 ||
                              t.type == quant::GgmlType::kBF16;
    const DType stored = t.type == quant::GgmlType::kF32   ? DType::kF32
                         : t.type == quant::GgmlType::kF16 ? DType::kF16
                                                           : DType::kBF16;
    // Float tensors keep their type (reordered ones are copied); quantized vectors become f32
    // (the model widens vectors anyway), quantized matrices the asked dtype.
    // In place only when the mapping keeps the elements aligned (general.alignment may be 1).
    if (!stored_float && t.ne.size() == 2 && quantized.keep.count(t.type)) {
      // Kept as stored: rows of blocks, reordered (a byte copy per row) only for Q/K.
      p.in_place = !p.interleaved;
      p.view.dtype = DType::kU8;
      p.view.quant = t.type;
      p.view.nbytes = t.nbytes;
      out.push_back(std::move(p));
      continue;
    }
    p.in_place = stored_float && !p.interleaved &&
                 reinterpret_cast<uintptr_t>(t.data) % dtype_size(stored) == 0;
    p.view.dtype = stored_float ? stored : t.ne.size() == 1 ? DType::kF32 : matrix_dtype;
    p.view.nbytes = static_cast<size_t>(t.numel()) * dtype_size(p.view.dtype);
    out.push_back(std::move(p));
  }
  return out;
}

// Dequantizes (or copies) one tensor into a buffer of its target dtype, rows in parallel.
Result<std::shared_ptr<std::vector<uint8_t>>> materialize(const PlannedTensor& p,
                                                          int64_t head_dim) {
  const GgufTensor& t = *p.source;
  const DType target = p.view.dtype;
  const int64_t rows = t.rows(), cols = t.row_elems();
  const size_t row_in = t.nbytes / static_cast<size_t>(rows);
  if (p.view.quant) {  // kept blocks whose rows are reordered: whole rows copied
    auto buffer = std::make_shared<std::vector<uint8_t>>(t.nbytes);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src_row = p.interleaved ? interleaved_row(r, head_dim) : r;
      std::memcpy(buffer->data() + static_cast<size_t>(r) * row_in,
                  t.data + static_cast<size_t>(src_row) * row_in, row_in);
    }
    return buffer;
  }
  const size_t row_out = static_cast<size_t>(cols) * dtype_size(target);
  auto buffer = std::make_shared<std::vector<uint8_t>>(row_out * static_cast<size_t>(rows));
  Status failed;
#pragma omp parallel
  {
    std::vector<float> tmp(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src_row = p.interleaved ? interleaved_row(r, head_dim) : r;
      Status st = quant::dequantize_row(t.type, t.data + static_cast<size_t>(src_row) * row_in,
                                        cols, tmp.data());
      if (!st.ok()) {
#pragma omp critical
        failed = st;
        continue;
      }
      uint8_t* out = buffer->data() + static_cast<size_t>(r) * row_out;
      for (int64_t k = 0; k < cols; ++k) {
        const float x = tmp[static_cast<size_t>(k)];
        if (target == DType::kF32) {
          std::memcpy(out + 4 * k, &x, 4);
        } else {
          const uint16_t h = target == DType::kBF16 ? f32_to_bf16(x) : f32_to_f16(x);
          std::memcpy(out + 2 * k, &h, 2);
        }
      }
    }
  }
  if (!failed.ok()) return failed.with_context(fmt::format("tensor '{}'", t.name));
  return buffer;
}

}  // namespace

Result<std::vector<TensorView>> gguf_tensor_plan(const GgufFile& file, const ModelConfig& config,
                                                 const QuantizedTensors& quantized) {
  RLT_ASSIGN_OR_RETURN(std::vector<PlannedTensor> planned, plan(file, config, quantized));
  std::vector<TensorView> views;
  for (PlannedTensor& p : planned) views.push_back(std::move(p.view));
  return views;
}

Result<Checkpoint> gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config,
                                   const QuantizedTensors& quantized, bool deferred) {
  RLT_ASSIGN_OR_RETURN(std::vector<PlannedTensor> planned, plan(*file, config, quantized));
  std::vector<TensorView> views;
  std::vector<std::shared_ptr<const void>> owners{file};
  for (PlannedTensor& p : planned) {
    if (p.in_place) {
      p.view.data = p.source->data;
      p.view.mapping = file->mapping();
    } else if (deferred) {
      p.view.convert = [file, p, head_dim = config.head_dim]()
          -> Result<std::shared_ptr<const std::vector<uint8_t>>> {
        auto buffer = materialize(p, head_dim);
        if (!buffer.ok()) return buffer.status().with_context(file->path());
        if (file->mapping()) file->mapping()->release(p.source->data, p.source->nbytes);
        return std::shared_ptr<const std::vector<uint8_t>>(std::move(*buffer));
      };
    } else {
      auto buffer = materialize(p, config.head_dim);
      if (!buffer.ok()) return buffer.status().with_context(file->path());
      p.view.data = (*buffer)->data();
      p.view.owner = *buffer;
      // The file's bytes of a converted tensor are not read again.
      if (file->mapping()) file->mapping()->release(p.source->data, p.source->nbytes);
    }
    views.push_back(std::move(p.view));
  }
  return Checkpoint::from_views(std::move(views), std::move(owners), {file->path()});
}

std::vector<GgufTypeCount> gguf_type_summary(const GgufFile& file) {
  std::map<std::string, GgufTypeCount> by;
  for (const GgufTensor& t : file.tensors()) {
    GgufTypeCount& c = by[std::string(quant::ggml_type_name(t.type))];
    c.type = quant::ggml_type_name(t.type);
    ++c.tensors;
    c.bytes += static_cast<int64_t>(t.nbytes);
  }
  std::vector<GgufTypeCount> out;
  for (auto& [_, c] : by) out.push_back(c);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace rlt::io
