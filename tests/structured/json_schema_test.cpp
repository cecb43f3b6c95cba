#include "structured/json_schema.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "structured_test_util.h"

namespace rlt::structured {
namespace {

std::shared_ptr<const CompiledGrammar> compile_schema(const std::string& schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << schema << ": " << gbnf.status().to_string();
  if (!gbnf.ok()) return nullptr;
  return testing::compile_gbnf(*gbnf);
}

struct Case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

TEST(JsonSchema, InstancesMatchExactlyWhenValid) {
  const std::vector<Case> cases = {
      {R"({"type":"string"})",
       {R"("")", R"("a\"b\\c\u00e9")", "\"\xC3\xA9\""},
       {"a", R"("a)", "\"a\nb\"", "1"}},
      {R"({"type":"integer"})",
       {"0", "-12", "1234567890123456"},
       {"01", "1.5", "-", "12345678901234567"}},
      {R"({"type":"number"})", {"0", "-1.25", "3e10", "2.5E-3"}, {"1.", ".5", "+1", "1e"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"True", "1"}},
      {R"({"type":["string","null"]})", {"null", R"("x")"}, {"1"}},
      {R"({"enum":["red","green",3,null]})", {R"("red")", "3", "null"}, {R"("blue")", "4"}},
      {R"({"const":{"a":[1,2]}})", {R"({"a":[1,2]})"}, {R"({"a":[1]})"}},
      {R"({"type":"integer","minimum":-5,"maximum":123})",
       {"-5", "0", "9", "99", "123", "-1"},
       {"-6", "124", "200", "1000", "-10"}},
      {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})", {"1", "9"}, {"0", "10"}},
      {R"({"type":"integer","minimum":100})", {"100", "999", "1000", "123456"}, {"99", "-1", "0"}},
      {R"({"type":"integer","maximum":-3})", {"-3", "-40", "-100000"}, {"-2", "0", "5"}},
      {R"({"type":"number","minimum":0,"maximum":1})",
       {"0", "0.5", "0.999", "1"},
       {"1.5", "-0.1", "2", "1.01"}},
      {R"({"type":"number","exclusiveMinimum":0,"maximum":10})",
       {"0.001", "5", "10"},
       {"0", "0.0", "10.5", "-1"}},
      {R"({"type":"number","minimum":-2,"exclusiveMaximum":0})",
       {"-2", "-1.5", "-0.5"},
       {"0", "-2.5", "1"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("a\nc")"},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}[0-9]+$"})", {R"("AB12")"}, {R"("A12")", R"("AB")"}},
      {R"({"type":"string","format":"date"})",
       {R"("2024-02-29")", R"("2000-02-29")", R"("0004-02-29")", R"("1999-12-31")", R"("2023-04-30")",
        R"("0001-01-01")"},
       {R"("2024-13-01")", R"("24-01-01")", R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")",
        R"("2023-02-30")", R"("0000-01-01")", R"("2023-00-10")", R"("2023-01-00")"}},
      {R"({"type":"string","format":"date-time"})",
       {R"("2024-02-29T23:59:59Z")", R"("2023-06-30T00:00:00.5+02:00")"},
       {R"("2023-02-29T10:00:00Z")", R"("2024-02-29 10:00:00Z")"}},
      {R"({"type":"string","format":"uuid"})",
       {R"("123e4567-e89b-12d3-a456-426614174000")"},
       {R"("123")"}},
      {R"({"type":"string","format":"ipv4"})",
       {R"("192.168.0.255")"},
       {R"("256.1.1.1")", R"("1.2.3")"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1, 2,3]"},
       {"[]", "[1,2,3,4]", "[1,]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {R"([])", R"(["a"])", R"(["a",1])"},
       {R"([1])", R"(["a",1,2])"}},
      {R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":2})",
       {R"(["a",1])", R"(["a",1,2,3])"},
       {R"(["a"])", R"([1,1])"}},
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]})",
       {R"({"name":"x"})", R"({"name":"x","age":3})", R"({ "name" : "x" , "age" : 3 })"},
       {R"({})", R"({"age":3})", R"({"age":3,"name":"x"})", R"({"name":"x","other":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}})",
       {R"({})", R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
       {R"({,"b":2})", R"({"a":1,})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})",
       {R"({})", R"({"x":1,"y":2})"},
       {R"({"x":"s"})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":true})",
       {R"({"a":1,"zz":[true]})"},
       {R"({"a":"x"})"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"type":"string"}}]})",
       {"5", R"(["a"])"},
       {R"("a")"}},
      {R"({"oneOf":[{"type":"string"},{"type":"boolean"}]})", {R"("a")", "true"}, {"1"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"},
       {R"({"v":1})"}},
      {R"({"type":"object","properties":{"n":{"type":"integer","nullable":true}},"required":["n"]})",
       {R"({"n":null})", R"({"n":2})"},
       {R"({"n":"x"})"}},
      {R"({})", {"1", R"({"a":[null]})", R"("s")"}, {"nul"}},
      // From a review: siblings of enum/const filter by type; undeclared required names follow
      // additionalProperties; minItems alone means an array; a surrogate pair is one character.
      {R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"}},
      {R"({"type":"object","required":["x"],"additionalProperties":{"type":"integer"}})", {R"({"x":1})"},
       {R"({"x":"s"})", R"({})"}},
      {R"({"minItems":2})", {"[1,2]"}, {"[]", "[1]", "{}"}},
      {R"({"type":"string","minLength":2})", {R"("ab")", R"("\ud83d\ude00x")"}, {R"("\ud83d\ude00")", R"("\ud800")"}},
      {R"({"type":"string","pattern":"^\\S$"})", {R"("a")"}, {"\"\xC2\xA0\"", "\"\xE2\x80\xA8\"", R"("\u001c")"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,"maxProperties":2})",
       {R"({"a":1})", R"({"a":1,"b":2})"}, {R"({})", R"({"a":1,"b":2,"c":3})"}},
      {R"({"type":"object","properties":{"t":{"type":"integer"}},"required":["t"],"additionalProperties":true,"maxProperties":2})",
       {R"({"t":1})", R"({"t":1,"x":null})"}, {R"({"t":1,"x":1,"y":2})"}},
  };
  for (const auto& c : cases) {
    auto g = compile_schema(c.schema);
    ASSERT_NE(g, nullptr) << c.schema;
    for (const char* v : c.valid)
      EXPECT_TRUE(testing::full_match(g, v)) << c.schema << " should accept " << v;
    for (const char* v : c.invalid)
      EXPECT_FALSE(testing::full_match(g, v)) << c.schema << " should refuse " << v;
  }
}

TEST(JsonSchema, IntegerRangesAreExactOverAWideSpan) {
  for (const auto& [lo, hi] :
       std::vector<std::pair<int, int>>{{0, 255}, {-37, 1042}, {7, 7}, {-999, -100}, {15, 2001}}) {
    auto g =
        compile_schema(fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi));
    ASSERT_NE(g, nullptr);
    for (int v = lo - 150; v <= hi + 150; ++v) {
      EXPECT_EQ(testing::full_match(g, std::to_string(v)), v >= lo && v <= hi)
          << lo << ".." << hi << ": " << v;
    }
  }
}

TEST(JsonSchema, PropertiesKeepTheSchemaOrder) {
  auto g = compile_schema(
      R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"type":"integer"}},"required":["zeta","alpha"]})");
  EXPECT_TRUE(testing::full_match(g, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(testing::full_match(g, R"({"alpha":2,"zeta":1})"));
}

TEST(JsonSchema, UnsupportedFeaturesAreRefusedByName) {
  const auto err = [](const std::string& schema) {
    auto r = json_schema_to_gbnf(schema);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_NE(err(R"({"type":"object","patternProperties":{"a":{}}})").find("'patternProperties'"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"number","multipleOf":3})").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"array","uniqueItems":true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","allOf":[{"minimum":0}]})").find("'allOf' beside"), std::string::npos);
  EXPECT_NE(err(R"({"enum":[1,2,3],"minimum":2})").find("'enum' beside the keyword 'minimum'"), std::string::npos);
  EXPECT_NE(err(R"({"const":12345678901234567890123})").find("2^53"), std::string::npos);
  EXPECT_NE(err(R"({"properties":{"a":{}},"required":["x"],"additionalProperties":false})").find("no object"),
            std::string::npos);
  EXPECT_NE(err(R"({"properties":{"x":{"not":{}}}})").find("#/properties/x"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"http://example.com/s.json"})").find("remote reference"),
            std::string::npos);
  EXPECT_NE(err(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})").find("same type"),
            std::string::npos);
  EXPECT_NE(err(R"({"allOf":[{"type":"integer"},{"minimum":1}]})").find("allOf"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"number","minimum":0.5})").find("non-integral minimum"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"string","format":"hostname"})").find("'hostname'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"string","pattern":"(a)\\1"})").find("backreferences"),
            std::string::npos);
  EXPECT_NE(err(R"({"$ref":"#/$defs/missing"})").find("points nowhere"), std::string::npos);
  EXPECT_NE(err("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"type":"widget"})").find("unknown type 'widget'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"),
            std::string::npos);
}

TEST(JsonSchema, JsonObjectModeAcceptsAnyObject) {
  auto g = testing::compile_gbnf(json_object_gbnf());
  EXPECT_TRUE(testing::full_match(g, R"({"a": [1, {"b": null}], "c": "d"})"));
  EXPECT_TRUE(testing::full_match(g, "{}"));
  EXPECT_FALSE(testing::full_match(g, "[1]"));
  EXPECT_FALSE(testing::full_match(g, R"({"a"})"));
}

}  // namespace
}  // namespace rlt::structured
