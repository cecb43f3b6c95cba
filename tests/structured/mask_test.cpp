// The step mask (position tables + uncertain-token checks + the state cache) against brute force:
// token t is allowed iff replaying the output so far and then t succeeds. Random walks through
// several grammars with vocabularies of multi-byte tokens that straddle rule boundaries.
#include <gtest/gtest.h>

#include <random>

#include "structured/json_schema.h"
#include "structured/regex_to_gbnf.h"
#include "structured_test_util.h"

namespace rlt::structured {
namespace {

constexpr int32_t kEos = 0;  // token 0 is the terminator in these vocabularies

std::shared_ptr<const TokenVocabulary> random_vocab(const std::string& alphabet, size_t count,
                                                    uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::optional<std::string>> bytes;
  bytes.push_back(std::nullopt);  // the terminator: a special token without bytes
  for (char c : alphabet) bytes.push_back(std::string(1, c));
  while (bytes.size() < count) {
    std::string t;
    const size_t len = 2 + rng() % 5;
    for (size_t k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    bytes.push_back(t);
  }
  bytes.push_back("\xC3\xA9");  // é
  bytes.push_back("\xC3");      // half of it
  bytes.push_back("\xA9\"");    // the other half and a quote
  bytes.push_back("");          // a token with no bytes is never allowed
  return std::make_shared<const TokenVocabulary>(bytes, bytes.size() + 5);  // + padding ids
}

void check_walks(const std::string& gbnf, const std::string& alphabet, uint32_t seed) {
  auto vocab = random_vocab(alphabet, 600, seed);
  auto g = testing::compile_gbnf(gbnf, vocab);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(seed);
  for (int walk = 0; walk < 6; ++walk) {
    GrammarMatcher m(g, {kEos});
    std::vector<int32_t> history;
    for (int step = 0; step < 40; ++step) {
      std::vector<uint64_t> mask(m.mask_words());
      m.fill_next_token_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < static_cast<int32_t>(vocab->vocab_size()); ++t) {
        GrammarMatcher replay(g, {kEos});
        for (int32_t h : history) ASSERT_TRUE(replay.accept_token(h));
        const bool expected = replay.accept_token(t);
        const bool got = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
        ASSERT_EQ(got, expected) << "token " << t << " '" << vocab->token_bytes(t) << "' after "
                                 << history.size() << " tokens, walk " << walk << "\n"
                                 << gbnf;
        if (got) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty()) << "a dead end after " << history.size() << " tokens";
      // Prefer continuing over ending, so that walks go deep.
      int32_t pick = allowed[rng() % allowed.size()];
      if (pick == kEos && allowed.size() > 1 && step < 30)
        pick = allowed[1 + rng() % (allowed.size() - 1)];
      ASSERT_TRUE(m.accept_token(pick));
      history.push_back(pick);
      if (pick == kEos) break;
    }
  }
}

TEST(Mask, EqualsBruteForceOnJsonSchemas) {
  auto gbnf = json_schema_to_gbnf(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"tags":{"type":"array","items":{"enum":["a","bc"]}},
          "n":{"type":"integer","minimum":-20,"maximum":300}},"required":["name","n"]})");
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
  check_walks(*gbnf, "{}[]\":,nametgsabc0129- \\", 1);
  check_walks(json_object_gbnf(), "{}[]\":,ab01-.e tfrulsn\\", 2);
}

TEST(Mask, EqualsBruteForceOnRegexAndGrammars) {
  auto re = regex_to_gbnf("(ab|a[0-9]+|\"x\")*c?", RegexTarget::kText);
  ASSERT_TRUE(re.ok());
  check_walks("root ::= " + *re + "\n", "ab01c\"x", 3);
  check_walks(
      "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= [0-9]+ | \"(\" expr \")\"\n",
      "0123+-()", 4);
  check_walks("root ::= [^\"]* \"\\\"\" [a-z]*\n", "ab\"c\xC3", 5);
}

}  // namespace
}  // namespace rlt::structured
