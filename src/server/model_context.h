// What the HTTP threads know about the served model: its name, tokenizer, chat template and the
// limits requests are checked against. Loaded once at startup, immutable afterwards, so every
// HTTP thread may read it without locks (Tokenizer and ChatTemplate are thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlt/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rlt::server {

struct ModelContext {
  std::string name;       // the served model name requests must use
  std::string model_path;  // the folder or .gguf file
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  std::optional<tok::ChatTemplate> chat_template;  // absent: /v1/chat/completions answers 400
  std::string chat_template_error;                 // why it is absent
  // Tokens that end an assistant turn in the chat template (e.g. <|im_end|>); chat requests stop
  // at them even when they are not the model's EOS, and they never appear as text.
  std::vector<int32_t> end_of_turn_ids;
  std::vector<int32_t> eos_token_ids;  // the config's (generation stops at them)
  std::optional<int32_t> bos_token_id;
  int64_t vocab_size = 0;
  int64_t total_loops = 0;  // the model's depth
  int64_t max_context = 0;  // max_position_embeddings

  // Reads the config, tokenizer and chat template of a model folder or GGUF file.
  static Result<ModelContext> load(const std::string& model, const std::string& served_name);
};

// The path's last component ("/m/ouro-1.4b/" -> "ouro-1.4b", "/m/smol.gguf" -> "smol"): the
// default served name.
std::string default_served_name(const std::string& model);

}  // namespace rlt::server
