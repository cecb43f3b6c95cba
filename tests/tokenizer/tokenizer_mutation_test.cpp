// Randomized mutation tests of the tokenizer.json loader: thousands of corrupted files (text
// edits, JSON tokens of every type inserted, values replaced by values of another type or extreme
// ones, keys deleted or repeated, deep nesting, broken regexes) each end in a clean error or a
// tokenizer that encodes and decodes — never a crash, a hang or an escaped exception (the
// sanitizer build runs this suite too). RLT_MUTATION_CASES scales the case count.
#include <gtest/gtest.h>

#include "../mutation_util.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "tokenizer/tokenizer.h"

namespace rlt::tok {
namespace {

using Json = nlohmann::ordered_json;

using mutation::cases;

// Small tokenizers covering the components rlt implements.
std::vector<std::string> base_tokenizers() {
  // Byte-level BPE (GPT-2 / SmolLM2 style) with the GPT-2 split regex, NFC, a BOS template.
  const std::string byte_level = R"({"version": "1.0",
    "added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": true, "single_word": false, "lstrip": false,
                      "rstrip": false, "normalized": false},
                     {"id": 9, "content": "<|im_start|>", "special": true},
                     {"id": 10, "content": " world", "special": false, "lstrip": true, "rstrip": true}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
      {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0]}}},
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "",
      "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
      "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2, "ab": 3, "\u0120": 4, "\u0120a": 5, "c": 6, "\u00c3": 7, "\u00a9": 8},
      "merges": ["a b", "\u0120 a"]}})";
  // Llama / SentencePiece style: Metaspace via normalizers, byte fallback, a decoder sequence.
  const std::string metaspace = R"({"version": "1.0",
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
      {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
      {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x41>": 3, "<0xC3>": 4, "<0xA9>": 5, "\u2581": 6, "a": 7, "b": 8,
                "\u2581a": 9, "ab": 10},
      "merges": [["\u2581", "a"], ["a", "b"]]}})";
  // Whitespace / punctuation / digits splitting with lowercasing, a word suffix and Bert pieces.
  const std::string words = R"({
    "added_tokens": [{"id": 6, "content": "[CLS]", "special": true}, {"id": 7, "content": "[SEP]", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
      {"type": "Strip", "strip_left": true, "strip_right": false}, {"type": "Append", "append": "!"}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
      {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": true},
      {"type": "Metaspace", "replacement": "_", "prepend_scheme": "first", "split": true},
      {"type": "CharDelimiterSplit", "delimiter": "x"}]},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 7], "cls": ["[CLS]", 6]},
    "decoder": {"type": "Metaspace", "replacement": "_", "prepend_scheme": "always", "split": true},
    "model": {"type": "BPE", "unk_token": "[UNK]", "end_of_word_suffix": "</w>",
      "vocab": {"[UNK]": 0, "a": 1, "b": 2, "a</w>": 3, "b</w>": 4, "ab</w>": 5, "!</w>": 8, "1</w>": 9},
      "merges": ["a b</w>"]}})";
  return {byte_level, metaspace, words};
}


// A value of another type, or an extreme one.
Json odd_value(std::mt19937_64& rng) {
  switch (rng() % 14) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return -1;
    case 3: return 0;
    case 4: return int64_t{1} << 31;
    case 5: return std::numeric_limits<int64_t>::max();
    case 6: return std::numeric_limits<int64_t>::min();
    case 7: return 1e308;
    case 8: return "";
    case 9: return "x";
    case 10: return Json::array();
    case 11: return Json::object();
    case 12: return std::string(20000, 'a');
    default: {  // deep nesting
      Json deep = Json::array();
      for (int k = 0; k < 300; ++k) deep = Json::array({deep});
      return deep;
    }
  }
}

std::string mutate_structure(const std::string& text, std::mt19937_64& rng) {
  return mutation::mutate_structure<Json>(text, rng, odd_value);
}

const char* const kPieces[] = {"null", "true", "-1", "1e309", "\"x\"", "[]", "{}", "0", "99999999999999999999",
                               "\xff", "\"\xc3\"", ",", ":", "\"", "[[[[[[[[[[[[[[[[", "\"(a+)+$\"", "\"\\\\\"",
                               "\"[\"", "\"\\\\p{Xx}\"", "\"\\\\u\""};

std::string mutate_text(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = static_cast<size_t>(rng() % s.size());
    switch (rng() % 5) {
      case 0: s[at] = static_cast<char>(rng()); break;
      case 1: s.resize(at); break;
      case 2: s.insert(at, kPieces[rng() % std::size(kPieces)]); break;
      case 3: s.erase(at, static_cast<size_t>(1 + rng() % 12)); break;
      case 4: s.insert(at, s.substr(at, static_cast<size_t>(1 + rng() % 40))); break;
    }
  }
  return s;
}

TEST(TokenizerMutation, CorruptedTokenizerJsonGivesCleanErrors) {
  const std::vector<std::string> bases = base_tokenizers();
  const std::string texts[] = {"ab ab", "Hello world, it's 2024!", "h\xc3\xa9llo \xe2\x96\x81 \xf0\x9f\x91\x8b",
                               "<s>a<|endoftext|>b</s>[CLS]x", "  \t\n", "bad \xff\xc3 utf8"};
  for (const auto& b : bases) {
    auto t = Tokenizer::from_json_string(b);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    for (const auto& text : texts) ASSERT_TRUE((*t)->encode(text, true).ok()) << text;
  }
  std::mt19937_64 rng(20261203);
  int errors = 0, loaded = 0, encode_errors = 0;
  const int n = cases(4000);
  for (int i = 0; i < n; ++i) {
    const std::string& base = bases[static_cast<size_t>(i) % bases.size()];
    // Half structural (reaches the component checks), half text edits (reaches the JSON parser),
    // and some both.
    std::string mutant = i % 2 == 0 ? mutate_structure(base, rng) : mutate_text(base, rng);
    if (i % 7 == 0) mutant = mutate_text(mutate_structure(base, rng), rng);
    auto t = Tokenizer::from_json_string(mutant);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty()) << mutant;
      ++errors;
      continue;
    }
    ++loaded;
    const Tokenizer& tok = **t;
    for (size_t k = 0; k < 3; ++k) {
      const std::string& text = texts[(static_cast<size_t>(i) + k) % std::size(texts)];
      auto ids = tok.encode(text, k % 2 == 0);
      if (!ids.ok()) {
        EXPECT_FALSE(ids.status().message().empty());
        ++encode_errors;
        continue;
      }
      auto back = tok.decode(*ids, k == 1);
      if (!back.ok()) {
        EXPECT_FALSE(back.status().message().empty());
        ++encode_errors;
      }
    }
    // Ids the file does not define, negative ones included, are skipped by decode.
    const std::vector<int32_t> odd_ids = {0, 1, 5, -1, 1 << 30, std::numeric_limits<int32_t>::max(), 3};
    auto text = tok.decode(odd_ids, false);
    if (!text.ok()) {
      EXPECT_FALSE(text.status().message().empty());
    }
    (void)tok.id_to_token(-1);
    (void)tok.token_to_id("\xff");
  }
  std::cout << "[ mutation ] " << n << " tokenizer.json mutants: " << errors << " errors, " << loaded
            << " loaded (" << encode_errors << " encode/decode errors)\n";
  EXPECT_EQ(errors + loaded, n);
  EXPECT_GT(errors, n / 4) << "the mutations must reach the loader's checks";
  EXPECT_GT(loaded, n / 20);
}

}  // namespace
}  // namespace rlt::tok
