// Helpers for the structured-output tests: grammars compiled against small vocabularies, and
// whole-text matching.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "structured/gbnf.h"
#include "structured/matcher.h"

namespace rlt::structured::testing {

// A vocabulary of every single byte plus `extra` tokens (ids 256...).
inline std::shared_ptr<const TokenVocabulary> byte_vocab(
    const std::vector<std::string>& extra = {}) {
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const auto& e : extra) bytes.push_back(e);
  return std::make_shared<const TokenVocabulary>(bytes, bytes.size());
}

inline std::shared_ptr<const CompiledGrammar> compile_gbnf(
    const std::string& gbnf, std::shared_ptr<const TokenVocabulary> vocab = nullptr) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << gbnf;
  if (!g.ok()) return nullptr;
  return std::make_shared<const CompiledGrammar>(std::move(*g), vocab ? vocab : byte_vocab());
}

// Whether `text` is a complete sentence of the grammar.
inline bool full_match(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g, {});
  return m.accept_bytes(text) && m.is_complete();
}

// Whether `text` is a prefix of some sentence.
inline bool prefix_match(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g, {});
  return m.accept_bytes(text);
}

}  // namespace rlt::structured::testing
