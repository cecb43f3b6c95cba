// Loading (malformed or unsupported tokenizer.json files give clear errors, never a crash) and
// basic use, including concurrent encoding.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tokenizer/tokenizer.h"

namespace rlt::tok {
namespace {

// A tiny byte-level BPE: "a", "b", "ab" with one merge.
std::string tiny(const std::string& model_extra = "", const std::string& top_extra = "") {
  return R"({"version":"1.0","added_tokens":[{"id":3,"content":"<s>","special":true}],)"
         R"("normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,)" +
         top_extra + R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"])" +
         model_extra + "}}";
}

Status load_error(const std::string& json) {
  auto t = Tokenizer::from_json_string(json);
  return t.ok() ? Status() : t.status();
}

TEST(TokenizerLoad, MinimalBpeEncodesAndDecodes) {
  auto t = Tokenizer::from_json_string(tiny());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto ids = (*t)->encode("aab<s>b", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 2, 3, 1}));
  auto text = (*t)->decode(*ids, false);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a ab <s> b");  // no decoder: HF joins tokens with spaces
  EXPECT_EQ((*t)->vocab_size(), 4u);
  EXPECT_TRUE((*t)->is_special(3));
}

TEST(TokenizerLoad, InvalidJsonNamesTheProblem) {
  const Status s = load_error("{\"model\": ");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not valid JSON"), std::string::npos) << s.to_string();
}

TEST(TokenizerLoad, WrongTypesNameTheField) {
  const Status s = load_error(R"({"model":{"type":"BPE","vocab":[],"merges":[]}})");
  EXPECT_NE(s.message().find("model.vocab"), std::string::npos) << s.to_string();
  const Status m = load_error(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a"]}})");
  EXPECT_NE(m.message().find("model.merges[0]"), std::string::npos) << m.to_string();
  const Status id = load_error(R"({"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}})");
  EXPECT_NE(id.message().find("model.vocab"), std::string::npos) << id.to_string();
  const Status root = load_error("[1, 2]");
  EXPECT_EQ(root.code(), ErrorCode::kInvalidArgument);
}

TEST(TokenizerLoad, MergeOutsideTheVocabularyIsRefusedLikeHf) {
  const Status s = load_error(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a b"]}})");
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'ab' is not in the vocabulary"), std::string::npos) << s.to_string();
}

TEST(TokenizerLoad, UnsupportedComponentsAreRefusedByName) {
  const Status model = load_error(R"({"model":{"type":"WordPiece","vocab":{}}})");
  EXPECT_EQ(model.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(model.message().find("'WordPiece'"), std::string::npos) << model.to_string();
  const Status norm = load_error(tiny("", R"("normalizer":{"type":"Precompiled"},)"));
  EXPECT_EQ(norm.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(norm.message().find("normalizer type 'Precompiled'"), std::string::npos);
  const Status dropout = load_error(tiny(R"(,"dropout":0.1)"));
  EXPECT_EQ(dropout.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(dropout.message().find("dropout"), std::string::npos);
  const Status dec = load_error(tiny("", R"("decoder":{"type":"CTC"},)"));
  EXPECT_NE(dec.message().find("decoder type 'CTC'"), std::string::npos) << dec.to_string();
}

TEST(TokenizerLoad, HostileFilesAreRefusedNotCrashed) {
  const Status sparse =
      load_error(R"({"model":{"type":"BPE","vocab":{"a":0,"b":2000000000},"merges":[]}})");
  EXPECT_NE(sparse.message().find("too sparse"), std::string::npos) << sparse.to_string();
  std::string nested = R"({"type":"Lowercase"})";
  for (int i = 0; i < 200; ++i) nested = R"({"type":"Sequence","normalizers":[)" + nested + "]}";
  const Status deep = load_error(tiny("", R"("normalizer":)" + nested + ","));
  EXPECT_NE(deep.message().find("nested too deeply"), std::string::npos) << deep.to_string();
  const Status bad_utf8 = load_error("{\"model\": \"\xff\"}");
  EXPECT_EQ(bad_utf8.code(), ErrorCode::kInvalidArgument);
}

TEST(TokenizerLoad, MissingFileIsNotFound) {
  auto t = Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace rlt::tok

namespace rlt::tok {
namespace {

// encode() shares the word cache between threads: results must not depend on interleaving.
TEST(TokenizerConcurrency, ParallelEncodesMatchSerialOnes) {
  auto t = Tokenizer::from_json_string(
      R"({"pre_tokenizer":{"type":"WhitespaceSplit"},"model":{"type":"BPE",)"
      R"("vocab":{"a":0,"b":1,"ab":2,"abb":3,"ba":4},"merges":["a b","ab b","b a"]}})");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::vector<std::string> texts;
  uint32_t state = 12345;
  for (int i = 0; i < 400; ++i) {
    std::string s;
    for (int k = 0; k < 60; ++k) {
      state = state * 1103515245u + 12345u;
      s.push_back("ab  "[(state >> 16) % 4]);
    }
    texts.push_back(s);
  }
  std::vector<std::vector<int32_t>> serial;
  for (const auto& s : texts) serial.push_back(*(*t)->encode(s, false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = th; i < texts.size(); i += 1 + th) {
          if (*(*t)->encode(texts[i], false) != serial[i]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace rlt::tok
