// Regular expressions against std::regex (ECMAScript) as the oracle: for every expression and
// many random strings, the grammar matches the whole string exactly when std::regex_match does.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "structured/regex_to_gbnf.h"
#include "structured_test_util.h"

namespace rlt::structured {
namespace {

std::shared_ptr<const CompiledGrammar> compile_regex(const std::string& re) {
  auto body = regex_to_gbnf(re, RegexTarget::kText);
  EXPECT_TRUE(body.ok()) << re << ": " << body.status().to_string();
  return testing::compile_gbnf("root ::= " + *body + "\n");
}

TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> expressions = {
      "a*b",      "(ab|c)+",       "[a-c]{2,3}d?", "a.c",     "\\d+(\\.\\d{1,2})?",
      "[^abc]*",  "(a|b)*abb",     "x{0}y",        "(a?){3}", "[\\w-]+@[a-c]+\\.(com|org)",
      "\\s*\\S+", "(?:ab){1,}c|d", "[.]\\.",       "a{2,}",   "(a|)+b",
      "[a\\-z]+", "\\x41\\u0042",  "\\(\\)",       "colou?r", "(0|[1-9][0-9]*)",
      "\\W\\D"};
  const std::string alphabet = "abcdxyz019.-@_ ()\tAB";
  std::mt19937 rng(12345);
  for (const auto& expr : expressions) {
    auto g = compile_regex(expr);
    ASSERT_NE(g, nullptr);
    const std::regex oracle(expr, std::regex::ECMAScript);
    int matches = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int len = static_cast<int>(rng() % 9);
      for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool expected = std::regex_match(s, oracle);
      matches += expected;
      EXPECT_EQ(testing::full_match(g, s), expected) << expr << " on '" << s << "'";
    }
    (void)matches;
  }
}

TEST(Regex, JsonStringTargetEscapesAndSearches) {
  auto body = regex_to_gbnf("a\"b", RegexTarget::kJsonString);
  ASSERT_TRUE(body.ok());
  auto g = testing::compile_gbnf("root ::= " + *body + "\n");
  EXPECT_TRUE(testing::full_match(g, "a\\\"b"));    // the quote is written escaped
  EXPECT_TRUE(testing::full_match(g, "xa\\\"by"));  // unanchored: a search
  EXPECT_FALSE(testing::full_match(g, "a\"b"));
  auto anchored = regex_to_gbnf("^[0-9]+$", RegexTarget::kJsonString);
  ASSERT_TRUE(anchored.ok());
  auto ga = testing::compile_gbnf("root ::= " + *anchored + "\n");
  EXPECT_TRUE(testing::full_match(ga, "123"));
  EXPECT_FALSE(testing::full_match(ga, "a123"));
  auto any = regex_to_gbnf("^.+$", RegexTarget::kJsonString);
  ASSERT_TRUE(any.ok());
  auto gany = testing::compile_gbnf("root ::= " + *any + "\n");
  EXPECT_TRUE(testing::full_match(gany, "tab\\there"));  // a control character, escaped
  EXPECT_FALSE(testing::full_match(gany, "tab\there"));
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  const auto err = [](const std::string& re) {
    auto r = regex_to_gbnf(re, RegexTarget::kText);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(err("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(err("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(err("\\bword").find("word boundaries"), std::string::npos);
  EXPECT_NE(err("a++").find("possessive"), std::string::npos);
  EXPECT_NE(err("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(err("\\p{L}").find("Unicode property"), std::string::npos);
  EXPECT_NE(err("a^b").find("very start or end"), std::string::npos);
  EXPECT_NE(err("(ab").find("unclosed group"), std::string::npos);
  EXPECT_NE(err("ab)").find("unbalanced"), std::string::npos);
  EXPECT_NE(err("[a").find("unterminated"), std::string::npos);
  EXPECT_NE(err("*a").find("nothing to repeat"), std::string::npos);
}

}  // namespace
}  // namespace rlt::structured
