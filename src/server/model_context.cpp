#include "server/model_context.h"

#include <filesystem>
#include <fmt/format.h>

#include "io/model_config.h"

namespace rlt::server {
namespace {

// End-of-turn markers of common chat formats (ChatML, Llama 3, Gemma, Mistral). Only markers the
// template actually emits and the tokenizer knows become stop tokens.
constexpr const char* kEndOfTurnMarkers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>"};

}  // namespace

std::string default_served_name(const std::string& model_dir) {
  std::filesystem::path p(model_dir);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? model_dir : name;
}

Result<ModelContext> ModelContext::load(const std::string& model_dir, const std::string& served_name) {
  ModelContext m;
  m.model_dir = model_dir;
  m.name = served_name.empty() ? default_served_name(model_dir) : served_name;
  const std::string dir = std::filesystem::path(model_dir).string();
  RLT_ASSIGN_OR_RETURN(io::ModelConfig config, io::load_model_config(dir + "/config.json"));
  m.vocab_size = config.vocab_size;
  m.total_loops = config.total_ut_steps;
  m.max_context = config.max_position_embeddings;
  auto tokenizer = tok::Tokenizer::from_file(dir + "/tokenizer.json");
  if (!tokenizer.ok()) return tokenizer.status().with_context("the server needs the model's tokenizer.json");
  m.tokenizer = *tokenizer;
  auto tmpl = tok::ChatTemplate::from_model_dir(dir);
  if (tmpl.ok()) {
    m.chat_template = std::move(*tmpl);
    for (const char* marker : kEndOfTurnMarkers) {
      auto id = m.tokenizer->token_to_id(marker);
      if (id && m.chat_template->source().find(marker) != std::string::npos) m.end_of_turn_ids.push_back(*id);
    }
  } else {
    m.chat_template_error = tmpl.status().message();
  }
  return m;
}

}  // namespace rlt::server
