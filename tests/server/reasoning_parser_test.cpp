// The reasoning splitter: <think> ... </think> to reasoning, the rest to content, in vLLM's
// deepseek_r1 convention; any split of the output into pieces gives the same result.
#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace rlt::server {
namespace {

struct Case {
  ReasoningFormat format;
  std::string text, reasoning, content;
  bool reasoned;
};

TEST(ReasoningSplitter, SplitsAtTheThinkBlock) {
  using F = ReasoningFormat;
  const Case cases[] = {
      // The template opened the block; a leading <think> is dropped all the same.
      {F::kDeepSeekR1, "Let me see.</think>\n\nParis.", "Let me see.", "\n\nParis.", true},
      {F::kDeepSeekR1, "<think>Hmm</think>Yes", "Hmm", "Yes", true},
      {F::kDeepSeekR1, "never closes", "never closes", "", true},
      {F::kDeepSeekR1, "</think>", "", "", true},
      {F::kDeepSeekR1, "a</think>b</think>c", "a", "b</think>c", true},
      {F::kDeepSeekR1, "<th", "<th", "", true},
      {F::kDeepSeekR1, "", "", "", true},
      // off: everything is content.
      {F::kNone, "<think>x</think>y", "", "<think>x</think>y", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << reasoning_format_name(c.format) << ": " << c.text);
    ReasoningSplitter s(c.format);
    const ReasoningSplitter::Delta d = s.push(c.text, /*last=*/true);
    EXPECT_EQ(d.reasoning, c.reasoning);
    EXPECT_EQ(d.content, c.content);
    EXPECT_EQ(s.reasoned(), c.reasoned);
  }
}

TEST(ReasoningSplitter, AnySplitIntoPiecesGivesTheWholeTextSplit) {
  const std::string texts[] = {"<think>step one, <then> two</think>\n\nThe answer: 4. </think>",
                               "thinking </thin k> still</think>done", "<th", "</think>",
                               "<think></think>"};
  std::mt19937 rng(7);
  for (ReasoningFormat f : {ReasoningFormat::kDeepSeekR1, ReasoningFormat::kNone}) {
    for (const std::string& text : texts) {
      const ReasoningSplitter::Delta whole = ReasoningSplitter(f).push(text, /*last=*/true);
      for (int trial = 0; trial < 200; ++trial) {
        ReasoningSplitter s(f);
        std::string reasoning, content;
        size_t at = 0;
        while (at < text.size()) {
          const size_t n = std::min(text.size() - at, size_t{1} + rng() % 4);
          ReasoningSplitter::Delta d =
              s.push(std::string_view(text).substr(at, n), at + n == text.size());
          reasoning += d.reasoning;
          content += d.content;
          at += n;
        }
        if (text.empty()) s.push("", true);
        ASSERT_EQ(reasoning, whole.reasoning) << text;
        ASSERT_EQ(content, whole.content) << text;
      }
    }
  }
}

TEST(ReasoningSplitter, NamesAreVllms) {
  EXPECT_EQ(*parse_reasoning_format("deepseek_r1"), ReasoningFormat::kDeepSeekR1);
  EXPECT_EQ(*parse_reasoning_format("none"), ReasoningFormat::kNone);
  auto bad = parse_reasoning_format("qwen3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("accepted: none, deepseek_r1"), std::string::npos);
}

}  // namespace
}  // namespace rlt::server
