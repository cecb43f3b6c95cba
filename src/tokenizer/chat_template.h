// Chat templates: renders a model's Jinja chat_template exactly as transformers'
// apply_chat_template(messages, tools=..., add_generation_prompt=..., tokenize=False, **kwargs)
// does with Python jinja2 (trim_blocks, lstrip_blocks, loopcontrols, the generation tag,
// raise_exception, strftime_now, and a tojson that keeps non-ASCII and key order).
//
// Key order matters (tojson prints dicts in insertion order, as Python does), so messages and
// tools are nlohmann::ordered_json. A ChatTemplate is immutable; render() is thread-safe.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "rlt/status.h"

namespace rlt::jinja {
struct Template;
}  // namespace rlt::jinja

namespace rlt::tok {

class ChatTemplate {
 public:
  // Reads tokenizer_config.json: "chat_template" (a string, or a list of {name, template} of
  // which `name` is chosen, "default" when `name` is empty) and the special tokens the template
  // may use (bos_token, eos_token, unk_token, pad_token, sep_token, cls_token, mask_token,
  // additional_special_tokens).
  static Result<ChatTemplate> from_tokenizer_config(const std::string& path,
                                                    std::string_view name = "");
  static Result<ChatTemplate> from_tokenizer_config_json(std::string_view json_text,
                                                         std::string_view name = "");
  // A model folder as transformers reads it: chat_template.jinja if present (newer exports),
  // else chat_template.json, else tokenizer_config.json's chat_template; special tokens from
  // tokenizer_config.json when it exists.
  static Result<ChatTemplate> from_model_dir(const std::string& dir, std::string_view name = "");
  // A bare template (no special tokens defined).
  static Result<ChatTemplate> from_string(std::string_view source);
  // A template with the special tokens it may use ({"bos_token": "<s>", "eos_token": ...}), as
  // GGUF metadata gives them.
  static Result<ChatTemplate> from_string(std::string_view source, const nlohmann::ordered_json& special_tokens);

  // `messages`: a JSON array of message objects. `extra`: a JSON object of further template
  // variables: "tools", "documents", and any kwargs (enable_thinking, date_string, ...); its
  // entries override the special tokens. Errors (including the template's raise_exception)
  // come back as kInvalidArgument with the template position.
  Result<std::string> render(
      const nlohmann::ordered_json& messages, bool add_generation_prompt,
      const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }
  // Template names of a multi-template config (empty for a single template).
  const std::vector<std::string>& available_names() const { return names_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const jinja::Template> template_;
  std::string source_;
  std::vector<std::string> names_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
};

class Tokenizer;

// The end-of-turn markers of common chat formats (ChatML's <|im_end|>, Llama 3's <|eot_id|>,
// Gemma's <end_of_turn>, ...) that `chat_template` emits and `tokenizer` has as tokens: a chat
// reply stops at them even when they are not the model's EOS.
std::vector<int32_t> end_of_turn_ids(const ChatTemplate& chat_template, const Tokenizer& tokenizer);

}  // namespace rlt::tok
