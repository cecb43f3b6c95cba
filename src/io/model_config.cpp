#include "io/model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace rlt::io {
namespace {

using json = nlohmann::json;

class FieldReader {
 public:
  FieldReader(const json& obj, const std::string& source) : obj_(obj), source_(source) {}

  Status error(std::string_view field, std::string_view what) const {
    return invalid_argument(fmt::format("{}: field '{}' {}", source_, field, what));
  }
  const std::string& source() const { return source_; }
  Status unsupported(std::string_view field, const json& value, std::string_view accepted) const {
    return unimplemented(fmt::format("{}: field '{}' is {}, which rlt does not support (accepted: {})",
                                     source_, field, value.dump(), accepted));
  }
  bool has(const char* field) const { return obj_.contains(field) && !obj_[field].is_null(); }
  const json& at(const char* field) const { return obj_[field]; }

  Result<int64_t> positive_int(const char* field) const {
    if (!obj_.contains(field)) return error(field, "is required");
    const json& v = obj_[field];
    if (!v.is_number_integer()) return error(field, fmt::format("must be an integer, got {}", v.dump()));
    int64_t x = v.get<int64_t>();
    if (x <= 0) return error(field, fmt::format("must be positive, got {}", x));
    return x;
  }
  Result<double> positive_number(const char* field, std::optional<double> fallback) const {
    if (!obj_.contains(field)) {
      if (fallback) return *fallback;
      return error(field, "is required");
    }
    const json& v = obj_[field];
    if (!v.is_number()) return error(field, fmt::format("must be a number, got {}", v.dump()));
    double x = v.get<double>();
    if (!(x > 0)) return error(field, fmt::format("must be positive, got {}", v.dump()));
    return x;
  }
  Result<std::optional<int64_t>> optional_token_id(const char* field) const {
    if (!has(field)) return std::optional<int64_t>();
    const json& v = obj_[field];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return error(field, fmt::format("must be a non-negative token id, got {}", v.dump()));
    return std::optional<int64_t>(v.get<int64_t>());
  }
  // eos_token_id may be one id or a list of ids.
  Result<std::vector<int64_t>> token_id_list(const char* field) const {
    std::vector<int64_t> ids;
    if (!has(field)) return ids;
    const json& v = obj_[field];
    auto take = [&](const json& x) -> Status {
      if (!x.is_number_integer() || x.get<int64_t>() < 0)
        return error(field, fmt::format("must be a token id or a list of token ids, got {}", v.dump()));
      ids.push_back(x.get<int64_t>());
      return {};
    };
    if (v.is_array()) {
      for (const auto& x : v) RLT_RETURN_IF_ERROR(take(x));
    } else {
      RLT_RETURN_IF_ERROR(take(v));
    }
    return ids;
  }

 private:
  const json& obj_;
  const std::string& source_;
};

Result<json> parse_object(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("{}: not valid JSON ({})", source, e.what()));
  }
  if (!j.is_object()) return invalid_argument(fmt::format("{}: expected a JSON object", source));
  return j;
}

// Fields of an Ouro config.json. Metadata fields are accepted and have no effect on the math.
const std::set<std::string>& ouro_known_fields() {
  static const std::set<std::string> kFields = {
      "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
      "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "total_ut_steps",
      "early_exit_threshold", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings",
      "attention_dropout", "use_sliding_window", "sliding_window", "layer_types",
      "initializer_range",
      // metadata
      "auto_map", "max_window_layers", "use_cache"};
  return kFields;
}

// Fields of a Nanbeige4.2 config.json (its remote-code NanbeigeConfig, as released): a Llama's
// fields plus the loop count (num_loops; vllm-rlt writes total_ut_steps beside it), the final
// norm's placement and training-only loss weights.
const std::set<std::string>& nanbeige_known_fields() {
  static const std::set<std::string> kFields = {
      "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "kv_channels",
      "hidden_act", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
      "rope_parameters", "attention_bias", "attention_dropout", "mlp_bias", "pretraining_tp",
      "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings", "initializer_range",
      "num_loops", "total_ut_steps", "skip_loop_final_norm", "loop_loss_weights",
      "early_exit_threshold",
      // metadata
      "auto_map", "use_cache"};
  return kFields;
}

// Fields of a Llama config.json (transformers LlamaConfig).
const std::set<std::string>& llama_known_fields() {
  static const std::set<std::string> kFields = {
      "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
      "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "attention_bias",
      "attention_dropout", "mlp_bias", "pretraining_tp", "bos_token_id", "eos_token_id",
      "pad_token_id", "tie_word_embeddings", "initializer_range",
      // metadata
      "use_cache"};
  return kFields;
}

// Fields every transformers PretrainedConfig may write (4.x writes many, 5.x writes all of them
// with their defaults): bookkeeping, label maps of classification heads, output flags, tokenizer
// ids and generation defaults that generation_config.json owns. None of them changes a causal
// LM's forward pass, so any value is accepted; the few that would (encoder-decoder wiring,
// cross-attention, pruned heads) are in kNeutralOnlyFields and must keep their neutral value.
const std::set<std::string>& pretrained_config_fields() {
  static const std::set<std::string> kFields = {
      "_name_or_path", "_model_name_or_path", "_commit_hash", "_attn_implementation",
      "_attn_implementation_internal", "transformers_version", "torch_dtype", "dtype", "use_bfloat16",
      "torchscript", "tf_legacy_loss", "return_dict", "output_attentions", "output_hidden_states",
      "output_scores", "return_dict_in_generate", "id2label", "label2id", "num_labels", "problem_type",
      "finetuning_task", "task_specific_params", "tokenizer_class", "prefix", "is_decoder",
      "chunk_size_feed_forward", "unk_token_id", "sep_token_id", "cls_token_id", "mask_token_id",
      "decoder_start_token_id", "forced_bos_token_id", "forced_eos_token_id",
      // generation defaults (generation_config.json and the request decide these)
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  return kFields;
}

// PretrainedConfig fields that would change the forward pass: accepted at their neutral value only.
struct NeutralField {
  const char* name;
  nlohmann::json neutral;
  const char* accepted;
};
const std::vector<NeutralField>& neutral_only_fields() {
  static const std::vector<NeutralField> kFields = {
      {"is_encoder_decoder", false, "false (rlt runs decoder-only models)"},
      {"add_cross_attention", false, "false (no cross-attention in a decoder-only model)"},
      {"tie_encoder_decoder", false, "false"},
      {"cross_attention_hidden_size", nullptr, "null"},
      {"pruned_heads", nlohmann::json::object(), "{} (no pruned attention heads)"},
  };
  return kFields;
}

// null, {"rope_type"|"type": "default"}, linear {factor} or llama3 {factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings}. `field` names the object in messages
// ("rope_scaling", or transformers 5's "rope_parameters", which also holds rope_theta).
Result<RopeScaling> parse_rope_scaling(const FieldReader& r, const char* field, const json& v) {
  RopeScaling s;
  if (v.is_null()) return s;
  constexpr const char* kAccepted = "null, {\"rope_type\": \"linear\", \"factor\": F} or {\"rope_type\": \"llama3\", "
                                    "\"factor\", \"low_freq_factor\", \"high_freq_factor\", "
                                    "\"original_max_position_embeddings\"}";
  if (!v.is_object()) return r.unsupported(field, v, kAccepted);
  // transformers 5's rope_parameters may omit the type (= "default"); rope_scaling must name it.
  const json fallback = std::string_view(field) == "rope_parameters" ? json("default") : json();
  const json type = v.contains("rope_type") ? v["rope_type"] : v.value("type", fallback);
  if (!type.is_string()) return r.unsupported(field, v, kAccepted);
  const std::string kind = type.get<std::string>();
  if (kind == "default") return s;
  const std::string sub_source = r.source() + ": " + field;  // FieldReader keeps a reference
  FieldReader sub(v, sub_source);
  if (kind == "linear") {
    s.kind = RopeScaling::Kind::kLinear;
    RLT_ASSIGN_OR_RETURN(s.factor, sub.positive_number("factor", std::nullopt));
    return s;
  }
  if (kind == "llama3") {
    s.kind = RopeScaling::Kind::kLlama3;
    RLT_ASSIGN_OR_RETURN(s.factor, sub.positive_number("factor", std::nullopt));
    RLT_ASSIGN_OR_RETURN(s.low_freq_factor, sub.positive_number("low_freq_factor", std::nullopt));
    RLT_ASSIGN_OR_RETURN(s.high_freq_factor, sub.positive_number("high_freq_factor", std::nullopt));
    RLT_ASSIGN_OR_RETURN(s.original_max_position_embeddings, sub.positive_int("original_max_position_embeddings"));
    if (!(s.high_freq_factor > s.low_freq_factor))
      return sub.error("high_freq_factor", "must be greater than low_freq_factor");
    return s;
  }
  return r.unsupported(field, v, kAccepted);
}

bool same_scaling(const RopeScaling& a, const RopeScaling& b) {
  return a.kind == b.kind && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor &&
         a.original_max_position_embeddings == b.original_max_position_embeddings;
}

// RoPE as transformers 4 writes it (rope_theta + rope_scaling) or as transformers 5 does
// (rope_parameters: {rope_theta, rope_type, scaling fields}). Both may be present; they must agree.
struct Rope {
  double theta = 0.0;
  RopeScaling scaling;
  bool scaling_given = false;  // rope_scaling or a non-default rope_parameters type
};
Result<Rope> parse_rope(const FieldReader& r, const json& j, std::optional<double> default_theta) {
  Rope rope;
  std::optional<double> legacy_theta;
  if (j.contains("rope_theta")) {
    RLT_ASSIGN_OR_RETURN(double t, r.positive_number("rope_theta", std::nullopt));
    legacy_theta = t;
  }
  RLT_ASSIGN_OR_RETURN(RopeScaling legacy, parse_rope_scaling(r, "rope_scaling", j.value("rope_scaling", json())));
  rope.scaling = legacy;
  rope.scaling_given = r.has("rope_scaling");
  std::optional<double> theta = legacy_theta;
  if (r.has("rope_parameters")) {
    const json& p = j["rope_parameters"];
    if (!p.is_object()) return r.error("rope_parameters", fmt::format("must be an object, got {}", p.dump()));
    RLT_ASSIGN_OR_RETURN(RopeScaling params, parse_rope_scaling(r, "rope_parameters", p));
    if (rope.scaling_given && !same_scaling(params, legacy)) {
      return r.error("rope_parameters", fmt::format("disagrees with rope_scaling ({} vs {}); keep one of them",
                                                    p.dump(), j["rope_scaling"].dump()));
    }
    rope.scaling = params;
    rope.scaling_given = rope.scaling_given || params.kind != RopeScaling::Kind::kNone;
    if (p.contains("rope_theta")) {
      const std::string sub_source = r.source() + ": rope_parameters";
      FieldReader sub(p, sub_source);
      RLT_ASSIGN_OR_RETURN(double t, sub.positive_number("rope_theta", std::nullopt));
      if (legacy_theta && *legacy_theta != t) {
        return r.error("rope_parameters", fmt::format("has rope_theta {} but the top-level rope_theta is {}; keep "
                                                      "one of them", t, *legacy_theta));
      }
      theta = t;
    }
  }
  if (!theta) {
    if (!default_theta) return r.error("rope_theta", "is required (top level, or inside rope_parameters)");
    theta = *default_theta;
  }
  rope.theta = *theta;
  return rope;
}

Status check_common_semantics(const FieldReader& r, const json& j, const ModelConfig& c) {
  if (r.has("hidden_act") && j["hidden_act"] != "silu")
    return r.unsupported("hidden_act", j["hidden_act"], "\"silu\"");
  if (r.has("attention_dropout") && !(j["attention_dropout"].is_number() && j["attention_dropout"].get<double>() == 0.0))
    return r.unsupported("attention_dropout", j["attention_dropout"], "0.0");
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.error("num_key_value_heads", fmt::format("({}) must divide num_attention_heads ({})",
                                                      c.num_kv_heads, c.num_heads));
  }
  if (c.head_dim % 2 != 0) return r.error("head_dim", fmt::format("must be even for RoPE, got {}", c.head_dim));
  return {};
}

// Llama's fields, as Llama and Nanbeige (a looped Llama) share them; `causal_lm` is the class
// config.json's architectures must name.
Status check_llama_semantics(const FieldReader& r, const json& j, const char* causal_lm = "LlamaForCausalLM") {
  if (r.has("architectures") && j["architectures"] != json::array({causal_lm}))
    return r.unsupported("architectures", j["architectures"], fmt::format("[\"{}\"]", causal_lm));
  for (const char* f : {"attention_bias", "mlp_bias"})
    if (r.has(f) && j[f] != false) return r.unsupported(f, j[f], "false (no projection biases)");
  if (r.has("pretraining_tp") && j["pretraining_tp"] != 1)
    return r.unsupported("pretraining_tp", j["pretraining_tp"], "1");
  if (r.has("tie_word_embeddings") && !j["tie_word_embeddings"].is_boolean())
    return r.error("tie_word_embeddings", "must be true or false");
  return {};
}

// Nanbeige's loop fields: num_loops (the released config) or total_ut_steps (vllm-rlt's), equal
// when both are given; model.norm after every loop (skip_loop_final_norm false).
Status parse_nanbeige_loops(const FieldReader& r, const json& j, ModelConfig& c) {
  std::optional<int64_t> loops, steps;
  if (r.has("num_loops")) {
    RLT_ASSIGN_OR_RETURN(int64_t n, r.positive_int("num_loops"));
    loops = n;
  }
  if (r.has("total_ut_steps")) {
    RLT_ASSIGN_OR_RETURN(int64_t n, r.positive_int("total_ut_steps"));
    steps = n;
  }
  if (loops && steps && *loops != *steps) {
    return r.error("total_ut_steps", fmt::format("({}) disagrees with num_loops ({}); keep one of them",
                                                 *steps, *loops));
  }
  if (!loops && !steps) return r.error("num_loops", "is required (how many times the layer stack runs)");
  c.total_ut_steps = loops ? *loops : *steps;
  if (r.has("skip_loop_final_norm")) {
    if (!j["skip_loop_final_norm"].is_boolean()) return r.error("skip_loop_final_norm", "must be true or false");
    if (j["skip_loop_final_norm"] == true) {
      return r.unsupported("skip_loop_final_norm", j["skip_loop_final_norm"],
                           "false: model.norm after every loop, as the released Nanbeige4.2 checkpoints");
    }
  }
  if (r.has("loop_loss_weights") && !j["loop_loss_weights"].is_array())
    return r.error("loop_loss_weights", "must be a list (training-only loss weights; no effect on inference)");
  return {};
}

Status check_nanbeige_semantics(const FieldReader& r, const json& j, const ModelConfig& c) {
  RLT_RETURN_IF_ERROR(check_llama_semantics(r, j, "NanbeigeForCausalLM"));
  if (r.has("kv_channels") && !(j["kv_channels"].is_number_integer() && j["kv_channels"].get<int64_t>() == c.head_dim)) {
    return r.error("kv_channels", fmt::format("({}) must equal head_dim ({}): rlt's K/V heads are head_dim wide",
                                              j["kv_channels"].dump(), c.head_dim));
  }
  if (c.early_exit_threshold < 0 || c.early_exit_threshold > 1)
    return r.error("early_exit_threshold", fmt::format("must be in [0, 1], got {}", c.early_exit_threshold));
  return {};
}

Status check_ouro_semantics(const FieldReader& r, const json& j, const ModelConfig& c) {
  if (!j.contains("architectures") || j["architectures"] != json::array({"OuroForCausalLM"}))
    return r.unsupported("architectures", j.value("architectures", json()), "[\"OuroForCausalLM\"]");
  if (c.rope_scaling.kind != RopeScaling::Kind::kNone)
    return r.unsupported("rope_parameters", j["rope_parameters"], "rope_type \"default\" (no RoPE scaling)");
  if (r.has("tie_word_embeddings") && j["tie_word_embeddings"] != false)
    return r.unsupported("tie_word_embeddings", j["tie_word_embeddings"], "false (Ouro stores lm_head separately)");
  if (r.has("use_sliding_window") && j["use_sliding_window"] != false)
    return r.unsupported("use_sliding_window", j["use_sliding_window"], "false");
  if (r.has("sliding_window")) return r.unsupported("sliding_window", j["sliding_window"], "null");
  if (r.has("layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.num_layers)
      return r.error("layer_types", fmt::format("must list one entry per layer ({})", c.num_layers));
    for (const auto& t : lt)
      if (t != "full_attention") return r.unsupported("layer_types", t, "\"full_attention\" for every layer");
  }
  if (c.early_exit_threshold < 0 || c.early_exit_threshold > 1)
    return r.error("early_exit_threshold", fmt::format("must be in [0, 1], got {}", c.early_exit_threshold));
  return {};
}

// Fields of Huginn-0125's config.json: RavenConfig's (raven_config_minimal.py, as the released
// file and save_pretrained write them). Training-only fields are accepted and have no effect on
// inference; the others are parsed or must keep the released model's value (parse_huginn).
const std::set<std::string>& huginn_known_fields() {
  static const std::set<std::string> kFields = {
      "architectures", "model_type", "n_embd", "n_heads", "num_attention_heads", "num_key_value_heads",
      "head_dim", "n_layers", "n_layers_in_prelude", "n_layers_in_recurrent_block", "n_layers_in_coda",
      "intermediate_size", "vocab_size", "padded_vocab_size", "block_size", "rope_base", "norm_eps",
      "mean_recurrence", "init_values", "injection_type", "state_init", "qk_bias", "bias", "tie_embeddings",
      "tie_word_embeddings", "test_time_noise", "test_time_noise_type", "bos_token_id", "eos_token_id",
      "pad_token_id", "architecture_class_name", "block_class_name", "norm_class_name", "mlp_class_name",
      "nonlin_name",
      // training-only
      "effective_expected_depth", "mean_backprop_depth", "sampling_scheme", "init_strategy", "init_orthogonal",
      "activation_checkpoint_impl", "padding_multiple",
      // metadata
      "name", "hf_config", "auto_map", "use_cache"};
  return kFields;
}

// Huginn's config (docs/models.md): the sizes, the recurrence, and every switch of the reference
// code that would change the math held at the released model's value.
Status parse_huginn(const FieldReader& r, const json& j, ModelConfig& c) {
  RLT_ASSIGN_OR_RETURN(c.hidden_size, r.positive_int("n_embd"));
  // RavenConfig maps num_attention_heads to n_heads: the released file has the first.
  if (!r.has("n_heads") && !r.has("num_attention_heads")) return r.error("n_heads", "is required (or num_attention_heads)");
  RLT_ASSIGN_OR_RETURN(c.num_heads, r.positive_int(r.has("n_heads") ? "n_heads" : "num_attention_heads"));
  if (r.has("n_heads") && r.has("num_attention_heads")) {
    RLT_ASSIGN_OR_RETURN(int64_t heads, r.positive_int("num_attention_heads"));
    if (heads != c.num_heads)
      return r.error("num_attention_heads", fmt::format("({}) disagrees with n_heads ({})", heads, c.num_heads));
  }
  c.num_kv_heads = c.num_heads;
  if (r.has("num_key_value_heads")) {
    RLT_ASSIGN_OR_RETURN(int64_t kv, r.positive_int("num_key_value_heads"));
    if (kv != c.num_heads)
      return r.unsupported("num_key_value_heads", j["num_key_value_heads"], "n_heads (Huginn has no GQA)");
  }
  if (c.hidden_size % c.num_heads != 0)
    return r.error("n_embd", fmt::format("({}) must be a multiple of n_heads ({})", c.hidden_size, c.num_heads));
  c.head_dim = c.hidden_size / c.num_heads;
  if (r.has("head_dim")) {
    RLT_ASSIGN_OR_RETURN(int64_t head_dim, r.positive_int("head_dim"));
    if (head_dim != c.head_dim)
      return r.error("head_dim", fmt::format("({}) must be n_embd / n_heads ({})", head_dim, c.head_dim));
  }
  RLT_ASSIGN_OR_RETURN(c.prelude_layers, r.positive_int("n_layers_in_prelude"));
  RLT_ASSIGN_OR_RETURN(c.num_layers, r.positive_int("n_layers_in_recurrent_block"));
  RLT_ASSIGN_OR_RETURN(c.coda_layers, r.positive_int("n_layers_in_coda"));
  if (r.has("n_layers")) {
    RLT_ASSIGN_OR_RETURN(int64_t n, r.positive_int("n_layers"));
    if (n != c.prelude_layers + c.num_layers + c.coda_layers) {
      return r.error("n_layers", fmt::format("({}) must be the prelude, recurrent and coda blocks together ({})",
                                             n, c.prelude_layers + c.num_layers + c.coda_layers));
    }
  }
  RLT_ASSIGN_OR_RETURN(c.intermediate_size, r.positive_int("intermediate_size"));
  RLT_ASSIGN_OR_RETURN(c.vocab_size, r.positive_int(r.has("padded_vocab_size") ? "padded_vocab_size" : "vocab_size"));
  if (r.has("vocab_size")) {
    RLT_ASSIGN_OR_RETURN(int64_t v, r.positive_int("vocab_size"));
    if (v > c.vocab_size)
      return r.error("vocab_size", fmt::format("({}) exceeds padded_vocab_size ({})", v, c.vocab_size));
  }
  c.max_position_embeddings = 4096;
  if (r.has("block_size")) {
    RLT_ASSIGN_OR_RETURN(c.max_position_embeddings, r.positive_int("block_size"));
  }
  RLT_ASSIGN_OR_RETURN(c.total_ut_steps, r.positive_int("mean_recurrence"));
  // The reference code's defaults (RavenConfig) for the two constants a config may omit.
  RLT_ASSIGN_OR_RETURN(c.rope_theta, r.positive_number("rope_base", 50000.0));
  RLT_ASSIGN_OR_RETURN(c.rms_norm_eps, r.positive_number("norm_eps", 1e-6));
  // "like-init": the state is drawn as the embedding was initialized, std sqrt(2 / (5 n_embd)),
  // then scaled as the embedding is; init_values may state both numbers.
  c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
  double state_std = std::sqrt(2.0 / (5.0 * static_cast<double>(c.hidden_size)));
  if (r.has("init_values")) {
    const json& iv = j["init_values"];
    if (!iv.is_object()) return r.error("init_values", "must be an object");
    FieldReader ir(iv, r.source());
    if (iv.contains("embed_scale")) {
      RLT_ASSIGN_OR_RETURN(c.embedding_scale, ir.positive_number("embed_scale", {}));
    }
    if (iv.contains("std")) {
      RLT_ASSIGN_OR_RETURN(state_std, ir.positive_number("std", {}));
    }
  }
  c.initial_state_std = state_std * c.embedding_scale;
  struct Fixed {
    const char* field;
    json value;
    const char* why;
  };
  const Fixed fixed[] = {
      {"architectures", json::array({"RavenForCausalLM"}), "[\"RavenForCausalLM\"]"},
      {"qk_bias", true, "true (the released blocks add a bias to q and k)"},
      {"bias", false, "false (no other projection biases)"},
      {"tie_embeddings", true, "true (the head is the embedding)"},
      {"tie_word_embeddings", true, "true (the head is the embedding)"},
      {"injection_type", "linear", "\"linear\" (the adapter on concat[state, prelude output])"},
      {"state_init", "like-init", "\"like-init\" (a truncated normal scaled as the embedding)"},
      {"test_time_noise", 0, "0 (no noise added during the recurrence)"},
      {"architecture_class_name", "RecurrentGPT", "\"RecurrentGPT\""},
      {"block_class_name", "SandwichBlock", "\"SandwichBlock\" (norms on the residual sums)"},
      {"norm_class_name", "RMSNorm_llama", "\"RMSNorm_llama\""},
      {"mlp_class_name", "GatedMLP", "\"GatedMLP\" (SiLU-gated)"},
      {"nonlin_name", "SiLU", "\"SiLU\""},
  };
  for (const Fixed& f : fixed)
    if (r.has(f.field) && j[f.field] != f.value) return r.unsupported(f.field, j[f.field], f.why);
  c.tie_word_embeddings = true;
  c.exit_gate = false;
  return {};
}

// The sizes, loops and RoPE of a transformers-style config (Ouro, Llama, Nanbeige).
Status parse_layer_stack(const FieldReader& r, const json& j, ModelConfig& c) {
  const bool llama = c.architecture == Architecture::kLlama;
  const bool nanbeige = c.architecture == Architecture::kNanbeige;
  RLT_ASSIGN_OR_RETURN(c.vocab_size, r.positive_int("vocab_size"));
  RLT_ASSIGN_OR_RETURN(c.hidden_size, r.positive_int("hidden_size"));
  RLT_ASSIGN_OR_RETURN(c.intermediate_size, r.positive_int("intermediate_size"));
  RLT_ASSIGN_OR_RETURN(c.num_layers, r.positive_int("num_hidden_layers"));
  RLT_ASSIGN_OR_RETURN(c.num_heads, r.positive_int("num_attention_heads"));
  if (j.contains("num_key_value_heads")) {
    RLT_ASSIGN_OR_RETURN(c.num_kv_heads, r.positive_int("num_key_value_heads"));
  } else {
    c.num_kv_heads = c.num_heads;
  }
  if (r.has("head_dim")) {
    RLT_ASSIGN_OR_RETURN(c.head_dim, r.positive_int("head_dim"));
  } else if (nanbeige && r.has("kv_channels")) {
    RLT_ASSIGN_OR_RETURN(c.head_dim, r.positive_int("kv_channels"));
  } else {
    if (c.hidden_size % c.num_heads != 0)
      return r.error("head_dim", "is absent and hidden_size is not divisible by num_attention_heads");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  RLT_ASSIGN_OR_RETURN(c.max_position_embeddings, r.positive_int("max_position_embeddings"));
  if (llama || nanbeige) {
    // Llama: transformers' LlamaConfig defaults for the optional fields. Nanbeige: no defaults
    // guessed (its remote code's are not transformers').
    c.total_ut_steps = 1;
    if (nanbeige) RLT_RETURN_IF_ERROR(parse_nanbeige_loops(r, j, c));
    RLT_ASSIGN_OR_RETURN(c.rms_norm_eps,
                         r.positive_number("rms_norm_eps", llama ? std::optional<double>(1e-6) : std::nullopt));
    RLT_ASSIGN_OR_RETURN(Rope rope, parse_rope(r, j, llama ? std::optional<double>(10000.0) : std::nullopt));
    c.rope_theta = rope.theta;
    c.rope_scaling = rope.scaling;
    c.tie_word_embeddings = r.has("tie_word_embeddings") && j["tie_word_embeddings"] == true;
  } else {
    RLT_ASSIGN_OR_RETURN(c.total_ut_steps, r.positive_int("total_ut_steps"));
    RLT_ASSIGN_OR_RETURN(c.rms_norm_eps, r.positive_number("rms_norm_eps", std::nullopt));
    if (r.has("rope_scaling")) return r.unsupported("rope_scaling", j["rope_scaling"], "null (no RoPE scaling)");
    RLT_ASSIGN_OR_RETURN(Rope rope, parse_rope(r, j, std::nullopt));
    c.rope_theta = rope.theta;
    c.rope_scaling = rope.scaling;
  }
  if (r.has("early_exit_threshold")) {
    if (!j["early_exit_threshold"].is_number())
      return r.error("early_exit_threshold", "must be a number");
    c.early_exit_threshold = j["early_exit_threshold"].get<double>();
  }
  return {};
}

}  // namespace

Status check_config_limits(const ModelConfig& c, const std::string& source) {
  struct Limit {
    const char* what;
    int64_t value, max;
  };
  const bool huginn = c.recurrent_injection();  // RavenConfig's names
  const Limit limits[] = {
      {huginn ? "padded_vocab_size" : "vocab_size", c.vocab_size, int64_t{1} << 24},
      {huginn ? "n_embd" : "hidden_size", c.hidden_size, int64_t{1} << 17},
      {"intermediate_size", c.intermediate_size, int64_t{1} << 19},
      {huginn ? "n_layers_in_recurrent_block" : "num_hidden_layers", c.num_layers, 1024},
      {huginn ? "n_heads" : "num_attention_heads", c.num_heads, 1024},
      {"num_key_value_heads", c.num_kv_heads, 1024},
      {"head_dim", c.head_dim, 4096},
      {huginn ? "block_size" : "max_position_embeddings", c.max_position_embeddings, int64_t{1} << 30},
      {huginn ? "mean_recurrence" : "total_ut_steps", c.total_ut_steps, 256},
      {"n_layers_in_prelude", c.prelude_layers, 1024},
      {"n_layers_in_coda", c.coda_layers, 1024},
  };
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      return invalid_argument(fmt::format("{}: {} = {} is larger than any model rlt runs (at most {}); the file is "
                                          "corrupt or not a model config", source, l.what, l.value, l.max));
    }
  }
  return {};
}

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kOuro:
      return "ouro";
    case Architecture::kLlama:
      return "llama";
    case Architecture::kNanbeige:
      return "nanbeige";
    case Architecture::kHuginn:
      return "huginn_raven";
  }
  return "?";
}

int64_t ModelConfig::params_per_layer() const {
  int64_t h = hidden_size;
  int64_t attn = h * q_dim() + 2 * h * kv_dim() + q_dim() * h;
  int64_t mlp = 3 * h * intermediate_size;
  if (recurrent_injection()) return attn + mlp + 4 * h + q_dim() + kv_dim();  // 4 norms, q/k bias
  return attn + mlp + (sandwich_norms() ? 4 : 2) * h;
}

int64_t ModelConfig::parameter_count() const {
  int64_t embed_and_head = (tie_word_embeddings ? 1 : 2) * vocab_size * hidden_size;
  int64_t final_norm = hidden_size;
  int64_t gate = has_exit_gate() ? hidden_size + 1 : 0;
  const int64_t adapter = recurrent_injection() ? 2 * hidden_size * hidden_size : 0;
  return embed_and_head + (num_layers + outer_layers()) * params_per_layer() + final_norm + gate + adapter;
}

Result<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source) {
  RLT_ASSIGN_OR_RETURN(json j, parse_object(json_text, source));
  FieldReader r(j, source);
  if (!j.contains("model_type") || !j["model_type"].is_string())
    return r.error("model_type", "is required (a string such as \"ouro\")");
  ModelConfig c;
  c.model_type = j["model_type"].get<std::string>();
  if (c.model_type == "ouro") {
    c.architecture = Architecture::kOuro;
  } else if (c.model_type == "llama") {
    c.architecture = Architecture::kLlama;
  } else if (c.model_type == "nanbeige") {
    c.architecture = Architecture::kNanbeige;
  } else if (c.model_type == "huginn_raven") {
    c.architecture = Architecture::kHuginn;
  } else {
    return r.unsupported("model_type", j["model_type"], "\"ouro\", \"llama\", \"nanbeige\", \"huginn_raven\"");
  }
  const bool llama = c.architecture == Architecture::kLlama;
  const bool nanbeige = c.architecture == Architecture::kNanbeige;
  const bool huginn = c.architecture == Architecture::kHuginn;
  const std::set<std::string>& known = llama      ? llama_known_fields()
                                       : nanbeige ? nanbeige_known_fields()
                                       : huginn   ? huginn_known_fields()
                                                  : ouro_known_fields();
  std::vector<std::string> unknown;
  for (const auto& [key, _] : j.items()) {
    const bool neutral_only = std::any_of(neutral_only_fields().begin(), neutral_only_fields().end(),
                                          [&](const NeutralField& f) { return key == f.name; });
    if (!known.count(key) && !pretrained_config_fields().count(key) &&
        !neutral_only)
      unknown.push_back(key);
  }
  if (!unknown.empty()) {
    return invalid_argument(fmt::format("{}: unknown field{} {} for model_type {}; rlt refuses fields it does not "
                                        "understand rather than ignore them (remove them if they do not change "
                                        "the model, or report them to rlt)",
                                        source, unknown.size() > 1 ? "s" : "",
                                        "'" + fmt::format("{}", fmt::join(unknown, "', '")) + "'", c.model_type));
  }
  for (const NeutralField& f : neutral_only_fields()) {
    if (r.has(f.name) && j[f.name] != f.neutral && !(f.neutral.is_null() && j[f.name].is_null()))
      return r.unsupported(f.name, j[f.name], f.accepted);
  }
  RLT_RETURN_IF_ERROR(huginn ? parse_huginn(r, j, c) : parse_layer_stack(r, j, c));
  RLT_ASSIGN_OR_RETURN(c.bos_token_id, r.optional_token_id("bos_token_id"));
  RLT_ASSIGN_OR_RETURN(c.pad_token_id, r.optional_token_id("pad_token_id"));
  RLT_ASSIGN_OR_RETURN(c.eos_token_ids, r.token_id_list("eos_token_id"));
  for (const char* f : {"torch_dtype", "dtype"})
    if (r.has(f) && j[f].is_string()) c.torch_dtype = j[f].get<std::string>();
  RLT_RETURN_IF_ERROR(check_config_limits(c, source));
  RLT_RETURN_IF_ERROR(check_common_semantics(r, j, c));
  RLT_RETURN_IF_ERROR(llama      ? check_llama_semantics(r, j)
                      : nanbeige ? check_nanbeige_semantics(r, j, c)
                      : huginn   ? Status()  // parse_huginn checked its switches
                                 : check_ouro_semantics(r, j, c));
  for (int64_t id : c.eos_token_ids) {
    if (id >= c.vocab_size)
      return r.error("eos_token_id", fmt::format("{} is outside the vocabulary ({})", id, c.vocab_size));
  }
  return c;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot open '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<ModelConfig> load_model_config(const std::string& path) {
  RLT_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_model_config(text, path);
}

Result<GenerationConfig> parse_generation_config(std::string_view json_text, const std::string& source) {
  RLT_ASSIGN_OR_RETURN(json j, parse_object(json_text, source));
  FieldReader r(j, source);
  GenerationConfig g;
  RLT_ASSIGN_OR_RETURN(g.bos_token_id, r.optional_token_id("bos_token_id"));
  RLT_ASSIGN_OR_RETURN(g.eos_token_ids, r.token_id_list("eos_token_id"));
  return g;
}

Result<GenerationConfig> load_generation_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationConfig{};
  RLT_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_generation_config(text, path);
}

}  // namespace rlt::io
