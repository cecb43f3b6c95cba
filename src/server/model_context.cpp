#include "server/model_context.h"

#include <filesystem>
#include <fmt/format.h>

#include "source/model_source.h"

namespace rlt::server {
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
  for (int64_t id : config.eos_token_ids) m.eos_token_ids.push_back(static_cast<int32_t>(id));
  if (config.bos_token_id) m.bos_token_id = static_cast<int32_t>(*config.bos_token_id);
  auto tokenizer = source.tokenizer();
  if (!tokenizer.ok()) return tokenizer.status().with_context("the server needs the model's tokenizer");
  m.tokenizer = *tokenizer;
  auto tmpl = source.chat_template();
  if (tmpl.ok()) {
    m.chat_template = std::move(*tmpl);
    m.end_of_turn_ids = tok::end_of_turn_ids(*m.chat_template, *m.tokenizer);
  } else {
    m.chat_template_error = tmpl.status().message();
  }
  return m;
}

}  // namespace rlt::server
