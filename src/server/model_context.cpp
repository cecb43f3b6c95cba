#include "server/model_context.h"

#include <filesystem>
#include <fmt/format.h>

#include "source/model_source.h"

namespace rlt::server {
namespace {

// End-of-turn markers of common chat formats (ChatML, Llama 3, Gemma, Mistral). Only markers the
// template actually emits and the tokenizer knows become stop tokens.
constexpr const char* kEndOfTurnMarkers[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>", "</s>"};

}  // namespace

std::string default_served_name(const std::string& model) {
  std::filesystem::path p(model);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  std::string name = p.filename().string();
  if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
  return name.empty() ? model : name;
}

Result<ModelContext> ModelContext::load(const std::string& model, const std::string& served_name) {
  ModelContext m;
  m.model_path = model;
  m.name = served_name.empty() ? default_served_name(model) : served_name;
  RLT_ASSIGN_OR_RETURN(source::ModelSource source, source::ModelSource::open(model));
  const io::ModelConfig& config = source.config();
  m.vocab_size = config.vocab_size;
  m.total_loops = config.total_ut_steps;
  m.max_context = config.max_position_embeddings;
  auto tokenizer = source.tokenizer();
  if (!tokenizer.ok()) return tokenizer.status().with_context("the server needs the model's tokenizer");
  m.tokenizer = *tokenizer;
  auto tmpl = source.chat_template();
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
