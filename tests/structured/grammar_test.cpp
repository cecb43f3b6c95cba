#include <gtest/gtest.h>

#include "common/utf8.h"
#include "structured/gbnf.h"
#include "structured/utf8_ranges.h"
#include "structured_test_util.h"

namespace rlt::structured {
namespace {

using testing::compile_gbnf;
using testing::full_match;
using testing::prefix_match;

TEST(Gbnf, LiteralsAlternativesAndRepetition) {
  auto g = compile_gbnf(R"(root ::= "a" ("b" | "cd")* "e"?  # comment
)");
  EXPECT_TRUE(full_match(g, "a"));
  EXPECT_TRUE(full_match(g, "abcdb"));
  EXPECT_TRUE(full_match(g, "abe"));
  EXPECT_FALSE(full_match(g, "ac"));
  EXPECT_TRUE(prefix_match(g, "abc"));
  EXPECT_FALSE(prefix_match(g, "aee"));
  EXPECT_FALSE(full_match(g, ""));
}

TEST(Gbnf, BoundedRepetition) {
  auto g = compile_gbnf("root ::= [0-9]{2,4} x{1,}\nx ::= \"x\"");
  EXPECT_FALSE(full_match(g, "1x"));
  EXPECT_TRUE(full_match(g, "12x"));
  EXPECT_TRUE(full_match(g, "1234xxx"));
  EXPECT_FALSE(full_match(g, "12345x"));
  EXPECT_FALSE(full_match(g, "12"));
  auto exact = compile_gbnf("root ::= \"ab\"{3}");
  EXPECT_TRUE(full_match(exact, "ababab"));
  EXPECT_FALSE(full_match(exact, "abab"));
}

TEST(Gbnf, RecursionAndNullableRules) {
  auto g = compile_gbnf(R"(root ::= list
list ::= "[" (item ("," item)*)? "]"
item ::= list | [a-z]+
)");
  EXPECT_TRUE(full_match(g, "[]"));
  EXPECT_TRUE(full_match(g, "[a,[b,[]],cd]"));
  EXPECT_FALSE(full_match(g, "[a,]"));
  EXPECT_FALSE(full_match(g, "[[a]"));
  auto nullable = compile_gbnf("root ::= a a a \"x\"\na ::= \"\" | \"\" | \"y\"");
  EXPECT_TRUE(full_match(nullable, "x"));
  EXPECT_TRUE(full_match(nullable, "yyx"));
  EXPECT_FALSE(full_match(nullable, "yyyyx"));
}

TEST(Gbnf, Utf8ClassesMatchWholeCharacters) {
  auto g = compile_gbnf("root ::= [^a]+");
  EXPECT_TRUE(full_match(g, "é€😀"));
  EXPECT_FALSE(full_match(g, "éa"));
  EXPECT_TRUE(prefix_match(g, "\xE2\x82"));       // inside "€"
  EXPECT_FALSE(full_match(g, "\xE2\x82"));        // incomplete character
  EXPECT_FALSE(prefix_match(g, "\xED\xA0\x80"));  // a surrogate is not a character
  EXPECT_FALSE(prefix_match(g, "\xC0\xAF"));      // overlong
  auto range = compile_gbnf("root ::= [α-ω]");
  EXPECT_TRUE(full_match(range, "λ"));
  EXPECT_FALSE(full_match(range, "A"));
  auto escapes = compile_gbnf(R"(root ::= "\x41\u00e9\n" [\]\-])");
  EXPECT_TRUE(full_match(escapes, "A\xC3\xA9\n]"));
  EXPECT_TRUE(full_match(escapes, "A\xC3\xA9\n-"));
}

TEST(Gbnf, Utf8SequencesCoverEveryScalarValueOnce) {
  // Every scalar value's encoding matches exactly one sequence; surrogates match none.
  const auto seqs = utf8_sequences(normalize_ranges({{0, kMaxCodePoint}}, false));
  for (char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u,
                      0x10FFFFu, 0x1F600u}) {
    std::string s;
    utf8::append(s, cp);
    int hits = 0;
    for (const auto& seq : seqs) {
      if (seq.size() != s.size()) continue;
      bool all = true;
      for (size_t i = 0; i < s.size(); ++i) all = all && seq[i].test(static_cast<uint8_t>(s[i]));
      hits += all;
    }
    EXPECT_EQ(hits, 1) << std::hex << static_cast<uint32_t>(cp);
  }
}

TEST(Gbnf, ErrorsNameTheProblem) {
  const auto err = [](const std::string& text) {
    auto g = parse_gbnf(text);
    return g.ok() ? std::string("ok") : g.status().message();
  };
  EXPECT_NE(err("root ::= a\n").find("'a' is used but never defined"), std::string::npos);
  EXPECT_NE(err("expr ::= \"x\"").find("no `root` rule"), std::string::npos);
  EXPECT_NE(err("root ::= root \"x\" | \"y\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= a \"x\"\na ::= \"y\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(err("root ::= [a-").find("line 1"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{5000}").find("above 4096"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{3,2}").find("below the minimum"), std::string::npos);
  EXPECT_NE(err("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(err("").find("empty"), std::string::npos);
  EXPECT_NE(err("root ::= (\"a\"").find("')'"), std::string::npos);
}

TEST(Matcher, ArenaCompactionKeepsTheParseState) {
  // 70,000 open brackets: as many stack frames, past the arena's compaction threshold.
  auto g = compile_gbnf("root ::= list\nlist ::= \"[\" (list (\",\" list)*)? \"]\"");
  GrammarMatcher m(g, {});
  const size_t depth = 70000;
  ASSERT_TRUE(m.accept_bytes(std::string(depth, '[')));
  ASSERT_TRUE(m.accept_bytes("],[]"));
  EXPECT_FALSE(m.accept_bytes("]]" + std::string(depth, ']')));  // one too many
  ASSERT_TRUE(m.accept_bytes(std::string(depth - 1, ']')));
  EXPECT_TRUE(m.is_complete());
}

TEST(Matcher, TooAmbiguousGrammarsFailExplicitly) {
  // Each "a" doubles the stacks; past StackExpander::kMaxStacks the matcher refuses and says so
  // instead of following a partial set (which could refuse tokens its mask allowed).
  auto g = compile_gbnf("root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"");
  GrammarMatcher m(g, {});
  int accepted = 0;
  while (accepted < 40 && m.accept_bytes("a")) ++accepted;
  EXPECT_LT(accepted, 40);
  EXPECT_TRUE(m.overflowed());
  GrammarMatcher fresh(g, {});
  EXPECT_TRUE(fresh.accept_bytes("aab"));
  EXPECT_FALSE(fresh.overflowed());
}

TEST(Gbnf, HelperRulesNeverMeetUserNames) {
  auto g = compile_gbnf("root ::= (\"a\") group-1 star-2\ngroup-1 ::= \"b\"\nstar-2 ::= \"c\"");
  EXPECT_TRUE(full_match(g, "abc"));
  EXPECT_FALSE(full_match(g, "aa"));
}

TEST(Matcher, TerminatorsOnlyWhenComplete) {
  auto g = compile_gbnf("root ::= \"ab\"");
  GrammarMatcher m(g, {7});  // token 7 stands in for end-of-sequence
  std::vector<uint64_t> mask(m.mask_words());
  m.fill_next_token_mask(mask);
  EXPECT_FALSE(mask[0] >> 7 & 1);
  EXPECT_FALSE(m.accept_token(7));
  EXPECT_TRUE(m.accept_token('a'));
  EXPECT_FALSE(m.accept_token('a'));
  EXPECT_TRUE(m.accept_token('b'));
  m.fill_next_token_mask(mask);
  size_t allowed = 0;
  for (uint64_t w : mask) allowed += static_cast<size_t>(__builtin_popcountll(w));
  EXPECT_EQ(allowed, 1u);
  EXPECT_TRUE(mask[0] >> 7 & 1);
  EXPECT_TRUE(m.accept_token(7));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token('a'));
}

}  // namespace
}  // namespace rlt::structured
