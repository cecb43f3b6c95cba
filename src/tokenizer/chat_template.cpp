#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "jinja/interpreter.h"
#include "jinja/parser.h"
#include "tokenizer/tokenizer.h"

namespace rlt::tok {
namespace {

using OJson = nlohmann::ordered_json;

// A special token in tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_content(const OJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    auto it = v.find("content");
    if (it != v.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot open '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// transformers' special_tokens_map: the special tokens the config sets.
OJson special_tokens_of(const OJson& cfg) {
  OJson out = OJson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    auto tok = cfg.find(key);
    if (tok == cfg.end()) continue;
    if (auto content = token_content(*tok)) out[key] = *content;
  }
  if (auto extra = cfg.find("additional_special_tokens"); extra != cfg.end() && extra->is_array()) {
    OJson list = OJson::array();
    for (const OJson& v : *extra) {
      if (auto content = token_content(v)) list.push_back(*content);
    }
    out["additional_special_tokens"] = std::move(list);
  }
  return out;
}

Result<OJson> parse_config(std::string_view json_text, std::string_view what) {
  OJson cfg;
  try {
    cfg = OJson::parse(json_text);
  } catch (const OJson::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
    return invalid_argument(fmt::format("{} is not valid JSON: {}", what, e.what()));
  }
  if (!cfg.is_object()) return invalid_argument(fmt::format("{}: expected an object", what));
  return cfg;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::from_string(std::string_view source) {
  ChatTemplate t;
  t.source_ = std::string(source);
  try {
    t.template_ = std::make_shared<const jinja::Template>(jinja::parse(source));
  } catch (const jinja::TemplateError& e) {
    return invalid_argument(fmt::format("chat template syntax error: {}", e.what()));
  }
  return t;
}

Result<ChatTemplate> ChatTemplate::from_string(std::string_view source, const OJson& special_tokens) {
  RLT_ASSIGN_OR_RETURN(ChatTemplate t, from_string(source));
  t.special_tokens_ = special_tokens;
  return t;
}

Result<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir, std::string_view name) {
  namespace fs = std::filesystem;
  OJson cfg = OJson::object();
  const std::string config_path = dir + "/tokenizer_config.json";
  if (fs::exists(config_path)) {
    RLT_ASSIGN_OR_RETURN(std::string text, read_text(config_path));
    auto parsed = parse_config(text, "tokenizer_config.json");
    if (!parsed.ok()) return parsed.status().with_context(config_path);
    cfg = std::move(parsed).value();
  }
  const std::string jinja_path = dir + "/chat_template.jinja";
  const std::string json_path = dir + "/chat_template.json";
  if (fs::exists(jinja_path)) {
    if (!name.empty() && name != "default") {
      return not_found(fmt::format("chat template '{}' not found: {} holds a single template", name,
                                   jinja_path));
    }
    RLT_ASSIGN_OR_RETURN(std::string source, read_text(jinja_path));
    auto t = from_string(source);
    if (!t.ok()) return t.status().with_context(jinja_path);
    t->special_tokens_ = special_tokens_of(cfg);
    return t;
  }
  if (fs::exists(json_path)) {
    RLT_ASSIGN_OR_RETURN(std::string text, read_text(json_path));
    auto parsed = parse_config(text, "chat_template.json");
    if (!parsed.ok()) return parsed.status().with_context(json_path);
    if (parsed->contains("chat_template")) cfg["chat_template"] = (*parsed)["chat_template"];
  }
  auto t = from_tokenizer_config_json(cfg.dump(), name);
  if (!t.ok()) return t.status().with_context(dir);
  return t;
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config_json(std::string_view json_text,
                                                              std::string_view name) {
  RLT_ASSIGN_OR_RETURN(OJson cfg, parse_config(json_text, "tokenizer_config.json"));
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) {
    return not_found("tokenizer_config.json has no chat_template");
  }
  std::string source;
  std::vector<std::string> names;
  if (it->is_string()) {
    if (!name.empty() && name != "default") {
      return not_found(
          fmt::format("chat template '{}' not found: the config has a single template", name));
    }
    source = it->get<std::string>();
  } else if (it->is_array()) {
    const std::string wanted = name.empty() ? "default" : std::string(name);
    bool found = false;
    for (const OJson& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return invalid_argument(
            "chat_template list entries must be {\"name\": ..., \"template\": ...}");
      }
      names.push_back(entry["name"].get<std::string>());
      if (names.back() == wanted) {
        source = entry["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) {
      return not_found(fmt::format("chat template '{}' not found (available: {})", wanted,
                                   fmt::join(names, ", ")));
    }
  } else {
    return invalid_argument("chat_template: expected a string or a list of named templates");
  }
  RLT_ASSIGN_OR_RETURN(ChatTemplate t, from_string(source));
  t.names_ = std::move(names);
  // transformers passes its special_tokens_map: the tokens that are set.
  t.special_tokens_ = special_tokens_of(cfg);
  return t;
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const std::string& path,
                                                         std::string_view name) {
  RLT_ASSIGN_OR_RETURN(std::string text, read_text(path));
  auto t = from_tokenizer_config_json(text, name);
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages,
                                         bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) return invalid_argument("messages must be a JSON array");
  if (!extra.is_null() && !extra.is_object())
    return invalid_argument("extra must be a JSON object");
  try {
    jinja::Dict vars;
    for (const auto& [k, v] : special_tokens_.items()) vars.set(k, jinja::from_json(v));
    vars.set("tools", jinja::Value::none());
    vars.set("documents", jinja::Value::none());
    if (extra.is_object()) {
      for (const auto& [k, v] : extra.items()) vars.set(k, jinja::from_json(v));
    }
    vars.set("messages", jinja::from_json(messages));
    vars.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
    return jinja::render(*template_, vars);
  } catch (const jinja::TemplateError& e) {
    return invalid_argument(fmt::format("chat template error: {}", e.what()));
  }
}

std::vector<int32_t> end_of_turn_ids(const ChatTemplate& chat_template, const Tokenizer& tokenizer) {
  static constexpr const char* kMarkers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>"};
  std::vector<int32_t> ids;
  for (const char* marker : kMarkers) {
    auto id = tokenizer.token_to_id(marker);
    if (id && chat_template.source().find(marker) != std::string::npos) ids.push_back(*id);
  }
  return ids;
}

}  // namespace rlt::tok
