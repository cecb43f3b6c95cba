// StructuredOutputs -> CompiledGrammar, cached: the front door of the structured-output engine.
// One compiler per vocabulary; requests with the same constraint share one compiled grammar (and
// so its position and step masks). Thread-safe: the server compiles on request threads while the
// engine thread reads.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "rlt/sampling_params.h"
#include "structured/compiled_grammar.h"

namespace rlt::structured {

// The GBNF text of a constraint (JSON schema and regex translated; a grammar as given).
Result<std::string> constraint_gbnf(const StructuredOutputs& spec);

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity = 64);

  // The compiled grammar of `spec`. Errors are
  // kInvalidArgument and say what in the constraint is wrong or unsupported.
  Result<std::shared_ptr<const CompiledGrammar>> compile(const StructuredOutputs& spec);

  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  std::mutex mutex_;
  std::list<std::string> order_;  // most recently used first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>,
                                            std::list<std::string>::iterator>>
      cache_;
};

}  // namespace rlt::structured
