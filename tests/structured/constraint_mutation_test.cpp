// Constraints are untrusted bytes (request fields): thousands of mutated JSON schemas, regular
// expressions and GBNF grammars must each compile or fail with a clean kInvalidArgument, and a
// compiled one must survive mask steps and token advances (under ASan/UBSan in CI).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "../mutation_util.h"
#include "structured/grammar_compiler.h"
#include "structured/matcher.h"
#include "structured_test_util.h"

namespace rlt::structured {
namespace {

using Kind = StructuredOutputs::Kind;

std::string mutate_bytes(std::string s, std::mt19937_64& rng) {
  static const std::string kSpecial = "{}[]()\"\\|*+?^$.-:,#=<>0123456789aZ \n\x80\xff";
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 4) {
      case 0:
        if (!s.empty() && at < s.size()) s.erase(at, 1 + rng() % 3);
        break;
      case 1:
        s.insert(at, 1, kSpecial[rng() % kSpecial.size()]);
        break;
      case 2:
        if (at < s.size()) s[at] = kSpecial[rng() % kSpecial.size()];
        break;
      default:
        if (!s.empty()) s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 8));  // repetition
        break;
    }
  }
  return s;
}

nlohmann::ordered_json odd_value(std::mt19937_64& rng) {
  switch (rng() % 9) {
    case 0: return -1;
    case 1: return 1e300;
    case 2: return "string";
    case 3: return nlohmann::ordered_json::array({"integer", "null"});
    case 4: return nlohmann::ordered_json::object({{"$ref", "#"}});
    case 5: return nullptr;
    case 6: return true;
    case 7: return 4097;
    default: return nlohmann::ordered_json::object({{"type", "array"}, {"minItems", 3}, {"maxItems", 1}});
  }
}

void exercise(GrammarCompiler& compiler, const StructuredOutputs& spec, std::mt19937_64& rng, int* compiled) {
  auto g = compiler.compile(spec);
  if (!g.ok()) {
    EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument) << g.status().to_string();
    EXPECT_FALSE(g.status().message().empty());
    return;
  }
  ++*compiled;
  GrammarMatcher m(*g, {0});
  std::vector<uint64_t> mask(m.mask_words());
  for (int step = 0; step < 12; ++step) {
    m.fill_next_token_mask(mask);
    std::vector<int32_t> allowed;
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t b = mask[w]; b; b &= b - 1) allowed.push_back(static_cast<int32_t>(w * 64 + __builtin_ctzll(b)));
    if (allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept_token(pick)) << "token " << pick << " allowed by the mask but refused, step " << step << ", constraint:\n" << spec.spec;
    if (m.is_terminated()) break;
  }
}

TEST(ConstraintMutation, MutatedConstraintsCompileOrFailCleanly) {
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"a":{"type":"integer","minimum":-5,"maximum":300},"b":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3}},"required":["a"]})",
      R"({"$defs":{"n":{"type":"object","properties":{"v":{"enum":[1,"x",null]},"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}}}},"$ref":"#/$defs/n"})",
      R"({"type":"array","prefixItems":[{"type":"number","exclusiveMinimum":0,"maximum":9},{"type":"string","pattern":"^[a-z]+$"}],"items":false})",
      R"({"oneOf":[{"type":"boolean"},{"type":"string","format":"date"}],"title":"t"})"};
  const std::vector<std::string> regexes = {"(ab|c[0-9]{2,3})+x?", "[^\"\\\\]*\\d{1,4}", "a|(b(c|d)*)+e{0,3}", "\\w+@\\w+\\.com"};
  const std::vector<std::string> grammars = {
      "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\" | num\nnum ::= [0-9]{1,3}",
      "root ::= (\"x\" | y)* \"!\"\ny ::= \"y\"? [^a-c]",
  };
  GrammarCompiler compiler(testing::byte_vocab({"ab", "\",", "{\"", "12", "\xC3\xA9"}), 4);
  std::mt19937_64 rng(2026);
  int compiled = 0;
  const int n = mutation::cases(6000);
  for (int i = 0; i < n; ++i) {
    StructuredOutputs spec;
    switch (i % 3) {
      case 0: {
        const std::string& seed = schemas[rng() % schemas.size()];
        spec = {Kind::kJsonSchema,
                rng() % 2 ? mutation::mutate_structure<nlohmann::ordered_json>(seed, rng, odd_value)
                          : mutate_bytes(seed, rng),
                {}};
        break;
      }
      case 1:
        spec = {Kind::kRegex, mutate_bytes(regexes[rng() % regexes.size()], rng), {}};
        break;
      default:
        spec = {Kind::kGrammar, mutate_bytes(grammars[rng() % grammars.size()], rng), {}};
        break;
    }
    exercise(compiler, spec, rng, &compiled);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(compiled, n / 10) << "the mutations should leave many constraints valid";
}

TEST(ConstraintMutation, HostileShapesAreBoundedNotFatal) {
  GrammarCompiler compiler(testing::byte_vocab(), 4);
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 20000; ++i) chain += fmt::format("r{} ::= r{} \"x\"\n", i, i + 1);
  chain += "r20000 ::= \"y\"\n";
  std::mt19937_64 rng(1);
  int compiled = 0;
  exercise(compiler, {Kind::kGrammar, chain, {}}, rng, &compiled);  // a 20,000-call chain before the first byte
  exercise(compiler, {Kind::kGrammar, "root ::= (\"a\" | \"a\" | \"a\"? \"a\")* \"b\"", {}}, rng, &compiled);
  std::string deep(5000, '[');
  auto r = compiler.compile({Kind::kJsonSchema, "{\"enum\":" + deep, {}});
  EXPECT_FALSE(r.ok());
  std::string nested;
  for (int i = 0; i < 400; ++i) nested += "{\"items\":";
  nested += "{}" + std::string(400, '}');
  auto d = compiler.compile({Kind::kJsonSchema, nested, {}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("levels deep"), std::string::npos) << d.status().message();
  EXPECT_EQ(compiled, 2);
}

}  // namespace
}  // namespace rlt::structured
