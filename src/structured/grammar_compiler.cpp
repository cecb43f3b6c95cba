#include "structured/grammar_compiler.h"

#include <fmt/format.h>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex_to_gbnf.h"

namespace rlt::structured {
namespace {

std::string cache_key(const StructuredOutputs& spec) {
  std::string key =
      fmt::format("{}:{}:{}", static_cast<int>(spec.kind), spec.spec.size(), spec.spec);
  for (const auto& c : spec.choices) key += fmt::format(":{}:{}", c.size(), c);
  return key;
}

}  // namespace

Result<std::string> constraint_gbnf(const StructuredOutputs& spec) {
  switch (spec.kind) {
    case StructuredOutputs::Kind::kJsonObject:
      return json_object_gbnf();
    case StructuredOutputs::Kind::kJsonSchema:
      return json_schema_to_gbnf(spec.spec);
    case StructuredOutputs::Kind::kRegex: {
      RLT_ASSIGN_OR_RETURN(std::string body, regex_to_gbnf(spec.spec, RegexTarget::kText));
      return "root ::= " + body + "\n";
    }
    case StructuredOutputs::Kind::kGrammar:
      return spec.spec;
    case StructuredOutputs::Kind::kChoice: {
      if (spec.choices.empty())
        return invalid_argument("a choice constraint needs at least one choice");
      std::string body;
      for (const auto& c : spec.choices) {
        if (c.empty())
          return invalid_argument("a choice constraint's choices must not be empty strings");
        body += (body.empty() ? "" : " | ") + gbnf_literal(c);
      }
      return "root ::= " + body + "\n";
    }
  }
  return invalid_argument("unknown structured-output kind");
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity)
    : vocab_(std::move(vocab)), capacity_(capacity) {}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(
    const StructuredOutputs& spec) {
  const std::string key = cache_key(spec);
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      order_.splice(order_.begin(), order_, it->second.second);
      return it->second.first;
    }
  }
  // Compiled outside the lock: two threads may compile the same spec once each.
  RLT_ASSIGN_OR_RETURN(std::string gbnf, constraint_gbnf(spec));
  RLT_ASSIGN_OR_RETURN(Grammar grammar, parse_gbnf(gbnf));
  auto compiled = std::make_shared<const CompiledGrammar>(std::move(grammar), vocab_);
  std::lock_guard lock(mutex_);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second.first;
  order_.push_front(key);
  cache_.emplace(key, std::make_pair(compiled, order_.begin()));
  while (cache_.size() > capacity_) {
    cache_.erase(order_.back());
    order_.pop_back();
  }
  return std::shared_ptr<const CompiledGrammar>(compiled);
}

}  // namespace rlt::structured
