#include "tokenizer/regex.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"

namespace rlt::tok {
namespace {

std::vector<std::string> matches(const Regex& re, std::string_view text) {
  std::vector<Span> spans;
  re.find_all(text, spans);
  std::vector<std::string> out;
  for (const Span& s : spans) out.emplace_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(Regex, Gpt2PatternSplitsLikeHuggingFace) {
  auto re = Regex::compile(byte_level::kGpt2Pattern);
  ASSERT_TRUE(re.ok()) << re.status().to_string();
  EXPECT_EQ(matches(*re, "Hello world's  x\n\n"),
            (std::vector<std::string>{"Hello", " world", "'s", " ", " x", "\n\n"}));
}

TEST(Regex, OnigurumaClassesAreTranslated) {
  // Oniguruma's \s includes U+0085 but not U+180E; \h is a hex digit; \w includes ² but not ₃.
  auto s = Regex::compile("\\s+");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(matches(*s,
                    "a\xC2\x85"
                    "b\xE1\xA0\x8E"
                    "c"),
            (std::vector<std::string>{"\xC2\x85"}));
  auto h = Regex::compile("\\h+");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(matches(*h, "xyz0fA9q"), (std::vector<std::string>{"0fA9"}));
  auto w = Regex::compile("\\w+");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(matches(*w, "c\xC2\xB2\xE2\x82\x83"), (std::vector<std::string>{"c\xC2\xB2"}));
}

TEST(Regex, EmptyMatchesFollowTheOnigIterator) {
  // After a match ending at e, an empty match at e is skipped (HF: "baaab" / a* -> b|aaa|b).
  auto re = Regex::compile("a*");
  ASSERT_TRUE(re.ok());
  std::vector<Span> spans;
  re->find_all("baaab", spans);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].begin, 0u);
  EXPECT_EQ(spans[0].end, 0u);
  EXPECT_EQ(spans[1].begin, 1u);
  EXPECT_EQ(spans[1].end, 4u);
  EXPECT_EQ(spans[2].begin, 5u);
  EXPECT_EQ(spans[2].end, 5u);
}

TEST(Regex, LiteralEscapesMetacharacters) {
  auto re = Regex::literal("a.b(");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(matches(*re, "a.b( axb("), (std::vector<std::string>{"a.b("}));
}

TEST(Regex, BadPatternsAreRefusedWithPosition) {
  auto bad = Regex::compile("(abc");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("offset"), std::string::npos) << bad.status().to_string();
  auto nested = Regex::compile("[a[b]]");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().code(), ErrorCode::kUnimplemented);
}

}  // namespace
}  // namespace rlt::tok
