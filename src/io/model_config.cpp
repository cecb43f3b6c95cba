#include "io/model_config.h"

#include <fmt/format.h>

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
      "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "total_ut_steps",
      "early_exit_threshold", "bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings",
      "attention_dropout", "use_sliding_window", "sliding_window", "layer_types",
      "initializer_range",
      // metadata
      "auto_map", "torch_dtype", "dtype", "transformers_version", "max_window_layers", "use_cache",
      "_name_or_path"};
  return kFields;
}

// Fields of a Llama config.json (transformers LlamaConfig).
const std::set<std::string>& llama_known_fields() {
  static const std::set<std::string> kFields = {
      "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
      "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling", "attention_bias",
      "attention_dropout", "mlp_bias", "pretraining_tp", "bos_token_id", "eos_token_id",
      "pad_token_id", "tie_word_embeddings", "initializer_range",
      // metadata
      "torch_dtype", "dtype", "transformers_version", "use_cache", "_name_or_path"};
  return kFields;
}

// null, {"rope_type"|"type": "default"}, linear {factor} or llama3 {factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings}.
Result<RopeScaling> parse_rope_scaling(const FieldReader& r, const json& j) {
  RopeScaling s;
  if (!r.has("rope_scaling")) return s;
  const json& v = j["rope_scaling"];
  constexpr const char* kAccepted = "null, {\"rope_type\": \"linear\", \"factor\": F} or {\"rope_type\": \"llama3\", "
                                    "\"factor\", \"low_freq_factor\", \"high_freq_factor\", "
                                    "\"original_max_position_embeddings\"}";
  if (!v.is_object()) return r.unsupported("rope_scaling", v, kAccepted);
  const json type = v.contains("rope_type") ? v["rope_type"] : v.value("type", json());
  if (!type.is_string()) return r.unsupported("rope_scaling", v, kAccepted);
  const std::string kind = type.get<std::string>();
  if (kind == "default") return s;
  const std::string sub_source = r.source() + ": rope_scaling";  // FieldReader keeps a reference
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
  return r.unsupported("rope_scaling", v, kAccepted);
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

Status check_llama_semantics(const FieldReader& r, const json& j) {
  if (r.has("architectures") && j["architectures"] != json::array({"LlamaForCausalLM"}))
    return r.unsupported("architectures", j["architectures"], "[\"LlamaForCausalLM\"]");
  for (const char* f : {"attention_bias", "mlp_bias"})
    if (r.has(f) && j[f] != false) return r.unsupported(f, j[f], "false (no projection biases)");
  if (r.has("pretraining_tp") && j["pretraining_tp"] != 1)
    return r.unsupported("pretraining_tp", j["pretraining_tp"], "1");
  if (r.has("tie_word_embeddings") && !j["tie_word_embeddings"].is_boolean())
    return r.error("tie_word_embeddings", "must be true or false");
  return {};
}

Status check_ouro_semantics(const FieldReader& r, const json& j, const ModelConfig& c) {
  if (!j.contains("architectures") || j["architectures"] != json::array({"OuroForCausalLM"}))
    return r.unsupported("architectures", j.value("architectures", json()), "[\"OuroForCausalLM\"]");
  if (r.has("rope_scaling")) return r.unsupported("rope_scaling", j["rope_scaling"], "null");
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

}  // namespace

int64_t ModelConfig::params_per_layer() const {
  int64_t h = hidden_size;
  int64_t attn = h * q_dim() + 2 * h * kv_dim() + q_dim() * h;
  int64_t mlp = 3 * h * intermediate_size;
  return attn + mlp + (sandwich_norms() ? 4 : 2) * h;
}

int64_t ModelConfig::parameter_count() const {
  int64_t embed_and_head = (tie_word_embeddings ? 1 : 2) * vocab_size * hidden_size;
  int64_t final_norm = hidden_size;
  int64_t gate = has_exit_gate() ? hidden_size + 1 : 0;
  return embed_and_head + num_layers * params_per_layer() + final_norm + gate;
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
  } else {
    return r.unsupported("model_type", j["model_type"], "\"ouro\", \"llama\"");
  }
  const bool llama = c.architecture == Architecture::kLlama;
  for (const auto& [key, _] : j.items()) {
    if (!(llama ? llama_known_fields() : ouro_known_fields()).count(key)) {
      return invalid_argument(fmt::format("{}: unknown field '{}' for model_type {}; rlt refuses "
                                          "fields it does not understand rather than ignore them",
                                          source, key, c.model_type));
    }
  }
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
  } else {
    if (c.hidden_size % c.num_heads != 0)
      return r.error("head_dim", "is absent and hidden_size is not divisible by num_attention_heads");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  RLT_ASSIGN_OR_RETURN(c.max_position_embeddings, r.positive_int("max_position_embeddings"));
  if (llama) {
    // transformers' LlamaConfig defaults for the optional fields.
    c.total_ut_steps = 1;
    RLT_ASSIGN_OR_RETURN(c.rms_norm_eps, r.positive_number("rms_norm_eps", 1e-6));
    RLT_ASSIGN_OR_RETURN(c.rope_theta, r.positive_number("rope_theta", 10000.0));
    c.tie_word_embeddings = r.has("tie_word_embeddings") && j["tie_word_embeddings"] == true;
    RLT_ASSIGN_OR_RETURN(c.rope_scaling, parse_rope_scaling(r, j));
  } else {
    RLT_ASSIGN_OR_RETURN(c.total_ut_steps, r.positive_int("total_ut_steps"));
    RLT_ASSIGN_OR_RETURN(c.rms_norm_eps, r.positive_number("rms_norm_eps", std::nullopt));
    RLT_ASSIGN_OR_RETURN(c.rope_theta, r.positive_number("rope_theta", std::nullopt));
  }
  if (r.has("early_exit_threshold")) {
    if (!j["early_exit_threshold"].is_number())
      return r.error("early_exit_threshold", "must be a number");
    c.early_exit_threshold = j["early_exit_threshold"].get<double>();
  }
  RLT_ASSIGN_OR_RETURN(c.bos_token_id, r.optional_token_id("bos_token_id"));
  RLT_ASSIGN_OR_RETURN(c.pad_token_id, r.optional_token_id("pad_token_id"));
  RLT_ASSIGN_OR_RETURN(c.eos_token_ids, r.token_id_list("eos_token_id"));
  for (const char* f : {"torch_dtype", "dtype"})
    if (r.has(f) && j[f].is_string()) c.torch_dtype = j[f].get<std::string>();
  RLT_RETURN_IF_ERROR(check_common_semantics(r, j, c));
  RLT_RETURN_IF_ERROR(llama ? check_llama_semantics(r, j) : check_ouro_semantics(r, j, c));
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
