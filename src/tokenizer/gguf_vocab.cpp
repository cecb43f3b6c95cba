#include "tokenizer/gguf_vocab.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace rlt::tok {
namespace {

// Plain (sorted-key) JSON: ordered_json looks keys up linearly, and a vocabulary has ~10^5 of them.
using Json = nlohmann::json;

// The split patterns of the Hugging Face tokenizers whose llama.cpp pre-tokenizer names map here
// (the same text splits as llama.cpp's regex lists for those names).
constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";

enum class PreFamily { kGpt2, kSmollm, kLlama3, kQwen2, kDefault };

// llama.cpp's tokenizer.ggml.pre names (llama-vocab.cpp) for the families rlt maps.
const std::map<std::string, PreFamily>& pre_families() {
  static const std::map<std::string, PreFamily> k = {
      {"default", PreFamily::kDefault},  {"gpt-2", PreFamily::kGpt2},
      {"gpt2", PreFamily::kGpt2},        {"phi-2", PreFamily::kGpt2},
      {"mpt", PreFamily::kGpt2},         {"olmo", PreFamily::kGpt2},
      {"smollm", PreFamily::kSmollm},    {"starcoder", PreFamily::kSmollm},
      {"refact", PreFamily::kSmollm},    {"codeshell", PreFamily::kSmollm},
      {"llama3", PreFamily::kLlama3},    {"llama-v3", PreFamily::kLlama3},
      {"llama-bpe", PreFamily::kLlama3}, {"falcon3", PreFamily::kLlama3},
      {"dbrx", PreFamily::kLlama3},      {"smaug-bpe", PreFamily::kLlama3},
      {"qwen2", PreFamily::kQwen2},      {"deepseek-r1-qwen", PreFamily::kQwen2},
      {"stablelm2", PreFamily::kQwen2},
  };
  return k;
}

Json split(const char* pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}
Json byte_level(bool use_regex, bool trim_offsets = true) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

Json pre_tokenizer(PreFamily f) {
  switch (f) {
    case PreFamily::kGpt2:
      return byte_level(true);
    case PreFamily::kSmollm:
      return {
          {"type", "Sequence"},
          {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
    case PreFamily::kLlama3:
      return {{"type", "Sequence"}, {"pretokenizers", {split(kLlama3Pattern), byte_level(false)}}};
    case PreFamily::kQwen2:
      return {{"type", "Sequence"},
              {"pretokenizers", {split(kQwen2Pattern), byte_level(false, false)}}};
    case PreFamily::kDefault:
      // llama.cpp's default list: punctuation runs, the GPT-2 split, digit runs, digit triples.
      return {{"type", "Sequence"},
              {"pretokenizers",
               {split("[\\p{P}\\$\\+<=>\\^~\\|]+"), split(kGpt2Pattern), split("\\p{N}+"),
                split("[0-9][0-9][0-9]"), byte_level(false)}}};
  }
  return nullptr;
}

int32_t type_of(const GgufVocab& v, size_t id) {
  return id < v.token_types.size() ? v.token_types[id]
                                   : static_cast<int32_t>(GgufTokenType::kNormal);
}

// Added tokens: matched in the raw text before the model, special ones hidden when decoding with
// skip_special_tokens (CONTROL and UNKNOWN tokens), user-defined ones shown.
Json added_tokens(const GgufVocab& v) {
  Json out = Json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const auto t = static_cast<GgufTokenType>(type_of(v, id));
    if (t != GgufTokenType::kControl && t != GgufTokenType::kUserDefined &&
        t != GgufTokenType::kUnknown)
      continue;
    out.push_back({{"id", id},
                   {"content", v.tokens[id]},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", t == GgufTokenType::kUserDefined},
                   {"special", t != GgufTokenType::kUserDefined}});
  }
  return out;
}

Result<Json> vocab_object(const GgufVocab& v) {
  Json vocab = Json::object();
  std::unordered_map<std::string, size_t> seen;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    auto [it, fresh] = seen.emplace(v.tokens[id], id);
    if (!fresh)
      return invalid_argument(
          fmt::format("tokenizer.ggml.tokens: '{}' appears twice (ids {} and {})",
                      v.tokens[id].substr(0, 60), it->second, id));
    vocab[v.tokens[id]] = id;
  }
  return vocab;
}

std::optional<std::string> token(const GgufVocab& v, std::optional<int32_t> id) {
  if (!id || *id < 0 || static_cast<size_t>(*id) >= v.tokens.size()) return std::nullopt;
  return v.tokens[static_cast<size_t>(*id)];
}

// bos/eos added around each sequence, as the GGUF's add_bos_token / add_eos_token say.
Result<Json> post_processor(const GgufVocab& v, bool add_bos, bool add_eos) {
  if (!add_bos && !add_eos) return Json(nullptr);
  Json single = Json::array(), pair = Json::array(),
               specials = Json::object();
  auto special = [&](std::optional<int32_t> id, const char* what,
                     int type_id) -> Result<Json> {
    auto text = token(v, id);
    if (!text)
      return invalid_argument(
          fmt::format("tokenizer.ggml.add_{}_token is set but the {} id is missing", what, what));
    specials[*text] = {{"id", *text}, {"ids", {*id}}, {"tokens", {*text}}};
    return Json{{"SpecialToken", {{"id", *text}, {"type_id", type_id}}}};
  };
  auto seq = [](const char* id, int type_id) {
    return Json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  for (int part = 0; part < 2; ++part) {
    Json& out = part == 0 ? single : pair;
    for (int s = 0; s <= part; ++s) {
      if (add_bos) {
        RLT_ASSIGN_OR_RETURN(auto b, special(v.bos, "bos", s));
        out.push_back(b);
      }
      out.push_back(seq(s == 0 ? "A" : "B", s));
      if (add_eos) {
        RLT_ASSIGN_OR_RETURN(auto e, special(v.eos, "eos", s));
        out.push_back(e);
      }
    }
  }
  return Json{{"type", "TemplateProcessing"},
                      {"single", single},
                      {"pair", pair},
                      {"special_tokens", specials}};
}

Result<Json> gpt2_json(const GgufVocab& v) {
  const std::string pre = v.pre.empty() ? "default" : v.pre;
  auto family = pre_families().find(pre);
  if (family == pre_families().end()) {
    return unimplemented(
        fmt::format("tokenizer.ggml.pre '{}' is a pre-tokenizer rlt does not know (known: {}); "
                    "put the model's tokenizer.json next to the .gguf file to use it instead",
                    pre, fmt::join(known_gguf_pre_tokenizers(), ", ")));
  }
  if (v.merges.empty())
    return invalid_argument("tokenizer.ggml.merges is required for a gpt2 (BPE) tokenizer");
  RLT_ASSIGN_OR_RETURN(Json vocab, vocab_object(v));
  RLT_ASSIGN_OR_RETURN(Json post,
                       post_processor(v, v.add_bos.value_or(false), v.add_eos.value_or(false)));
  Json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added_tokens(v);
  // Qwen2's tokenizers normalize to NFC; llama.cpp's qwen2 splitter sees NFC text in practice.
  j["normalizer"] =
      family->second == PreFamily::kQwen2 ? Json{{"type", "NFC"}} : Json(nullptr);
  j["pre_tokenizer"] = pre_tokenizer(family->second);
  j["post_processor"] = post;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  Json merges = Json::array();
  for (const std::string& m : v.merges) {
    // llama.cpp splits a merge at the first space after its first character.
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size())
      return invalid_argument(
          fmt::format("tokenizer.ggml.merges: '{}' is not 'left right'", m.substr(0, 60)));
    merges.push_back(Json::array({m.substr(0, space), m.substr(space + 1)}));
  }
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", family->second == PreFamily::kLlama3},
                {"vocab", vocab},
                {"merges", merges}};
  return j;
}

// SentencePiece BPE as merges: every split of a piece into two pieces of the vocabulary is a
// merge, ranked by the merged piece's score (transformers' SentencePieceExtractor).
std::vector<std::pair<std::string, std::string>> spm_merges(const GgufVocab& v) {
  std::unordered_map<std::string, size_t> id;
  for (size_t i = 0; i < v.tokens.size(); ++i) id.emplace(v.tokens[i], i);
  struct Merge {
    float score;
    size_t left, right;
  };
  std::vector<Merge> merges;
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    const std::string& piece = v.tokens[t];
    const auto type = static_cast<GgufTokenType>(type_of(v, t));
    if (type != GgufTokenType::kNormal && type != GgufTokenType::kUserDefined) continue;
    std::vector<Merge> local;
    for (size_t cut = utf8::seq_len(static_cast<unsigned char>(piece[0])); cut < piece.size();
         cut += utf8::seq_len(static_cast<unsigned char>(piece[cut]))) {
      auto l = id.find(piece.substr(0, cut)), r = id.find(piece.substr(cut));
      if (l != id.end() && r != id.end()) local.push_back({v.scores[t], l->second, r->second});
    }
    std::sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  for (const Merge& m : merges) out.emplace_back(v.tokens[m.left], v.tokens[m.right]);
  return out;
}

Result<Json> llama_json(const GgufVocab& v) {
  if (v.scores.size() != v.tokens.size()) {
    return invalid_argument(fmt::format("tokenizer.ggml.scores has {} entries for {} tokens",
                                        v.scores.size(), v.tokens.size()));
  }
  RLT_ASSIGN_OR_RETURN(Json vocab, vocab_object(v));
  // SentencePiece's defaults (llama.cpp's too): a prefix space, bos added, eos not.
  const bool prefix = v.add_space_prefix.value_or(true);
  RLT_ASSIGN_OR_RETURN(Json post,
                       post_processor(v, v.add_bos.value_or(true), v.add_eos.value_or(false)));
  const std::string space = "\xE2\x96\x81";  // ▁
  Json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added_tokens(v);
  Json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", space}};
  j["normalizer"] =
      prefix ? Json{{"type", "Sequence"},
                            {"normalizers", {{{"type", "Prepend"}, {"prepend", space}}, replace}}}
             : replace;
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = post;
  Json decoders = {
      {{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
      {{"type", "ByteFallback"}},
      {{"type", "Fuse"}}};
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  Json merges = Json::array();
  for (auto& [l, r] : spm_merges(v)) merges.push_back(Json::array({l, r}));
  auto unk = token(v, v.unk);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk ? Json(*unk) : Json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"vocab", vocab},
                {"merges", merges}};
  return j;
}

}  // namespace

const std::vector<std::string>& known_gguf_pre_tokenizers() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const auto& [name, _] : pre_families()) names.push_back(name);
    return names;
  }();
  return k;
}

Result<std::string> tokenizer_json_from_gguf(const GgufVocab& v) {
  if (v.tokens.empty()) return invalid_argument("tokenizer.ggml.tokens is missing or empty");
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size()) {
    return invalid_argument(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens",
                                        v.token_types.size(), v.tokens.size()));
  }
  Result<Json> j = invalid_argument("");
  if (v.model == "gpt2") {
    j = gpt2_json(v);
  } else if (v.model == "llama") {
    j = llama_json(v);
  } else {
    return unimplemented(
        fmt::format("tokenizer.ggml.model '{}' is not supported (accepted: gpt2, llama)", v.model));
  }
  if (!j.ok()) return j.status();
  return j->dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::shared_ptr<const Tokenizer>> tokenizer_from_gguf(const GgufVocab& v) {
  RLT_ASSIGN_OR_RETURN(std::string text, tokenizer_json_from_gguf(v));
  return Tokenizer::from_json_string(text);
}

}  // namespace rlt::tok
