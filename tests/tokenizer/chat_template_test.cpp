// Chat templates without the Python oracle: expected strings below were produced by Python
// jinja2 in transformers' environment (tools/tokenizer_oracle_chat.py's ENV). Also: every error
// names what went wrong and where, and never crashes.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace rlt::tok {
namespace {

using OJson = nlohmann::ordered_json;

std::string render(const std::string& source, const OJson& messages = OJson::array(),
                   const OJson& extra = OJson::object()) {
  auto t = ChatTemplate::from_string(source);
  if (!t.ok()) return "ERR " + t.status().message();
  auto r = t->render(messages, false, extra);
  return r.ok() ? *r : "ERR " + r.status().message();
}

TEST(ChatTemplate, WhitespaceControlMatchesJinja2) {
  EXPECT_EQ(render("{%- for m in messages -%}\n  {{ m }}\n{% endfor %}", OJson{"a", "b"}),
            "a\nb\n");
  EXPECT_EQ(render("A\n  {# c #}\nB {%+ if 1 %}x{% endif +%}\nC{{- ' ' -}}\n D\n"), "A\nB x\nC D");
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y  \n"), "  x\n  y  ");
}

TEST(ChatTemplate, ValuesPrintLikePython) {
  EXPECT_EQ(render("{{ (1, 2) }} {{ 2.0 * 3 }} {{ 1/3 }} {{ -0.0 }} {{ 10**15 / 7 }} "
                   "{{ 'é'|length }} {{ 'a\\u00e9\\x41\\n'|tojson }}"),
            "(1, 2) 6.0 0.3333333333333333 -0.0 142857142857142.84 1 \"a\xC3\xA9"
            "A\\n\"");
  EXPECT_EQ(render("{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'xxhixx'.strip('x') }} "
                   "{{ '  y '|trim }}"),
            "['a', 'b', 'c'] ['a', 'b', '', 'c'] hi y");
  EXPECT_EQ(render("{% set x = [3,1,2] %}{{ x|sort|join }}{{ x|max }}{{ x|min }}{{ x|sum }}"
                   "{{ x[-1] }}{{ x[1:] }}"),
            "1233162[1, 2]");
  EXPECT_EQ(render("{{ {'b': 2, 'a': 1}|dictsort }} {{ {'b': 2, 'a': 1}|items|list }}"),
            "[('a', 1), ('b', 2)] [('b', 2), ('a', 1)]");
}

TEST(ChatTemplate, LoopScopingFollowsJinja2) {
  EXPECT_EQ(
      render("{% set x = 0 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}"),
      "120");
  EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "3");
}

TEST(ChatTemplate, RaiseExceptionMessageComesThrough) {
  const std::string out = render("line one\n{{ raise_exception('roles must alternate') }}");
  EXPECT_NE(out.find("roles must alternate"), std::string::npos) << out;
  EXPECT_NE(out.find("line 2"), std::string::npos) << out;
}

TEST(ChatTemplate, UnsupportedConstructsAreNamedWithPosition) {
  for (const char* stmt : {"include", "extends", "import", "call", "block"}) {
    const std::string out = render(std::string("ok\n  {% ") + stmt + " 'x' %}");
    EXPECT_NE(out.find(std::string("'") + stmt + "' statement is not supported"), std::string::npos)
        << out;
    EXPECT_NE(out.find("line 2"), std::string::npos) << out;
  }
  EXPECT_NE(render("{% for x in y recursive %}{% endfor %}").find("recursive"), std::string::npos);
}

TEST(ChatTemplate, SyntaxErrorsNamePosition) {
  EXPECT_NE(render("{% if x %}never closed").find("missing end tag"), std::string::npos);
  EXPECT_NE(render("{{ messages[ }}").find("column"), std::string::npos);
  EXPECT_NE(render("{{ 'unterminated }}").find("unclosed string"), std::string::npos);
  EXPECT_NE(render("{# open comment").find("unclosed comment"), std::string::npos);
  EXPECT_NE(render("{{ x | nosuchfilter }}").find("no filter named 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(render("{{ x is nosuchtest }}").find("no test named 'nosuchtest'"), std::string::npos);
}

TEST(ChatTemplate, RuntimeErrorsDoNotCrash) {
  EXPECT_NE(render("{{ undefined_thing.attr }}").find("'undefined_thing' is undefined"),
            std::string::npos);
  EXPECT_NE(render("{{ 'a' + 1 }}").find("can only concatenate str"), std::string::npos);
  EXPECT_NE(render("{{ 1 // 0 }}").find("ZeroDivisionError"), std::string::npos);
  EXPECT_NE(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"),
            std::string::npos);
  EXPECT_NE(render("{{ [1].append(2) }}").find("unsafe"), std::string::npos);
  EXPECT_NE(render("{{ 10 ** 20 }}").find("OverflowError"), std::string::npos);
}

TEST(ChatTemplate, HostileNestingIsAnErrorNotACrash) {
  EXPECT_NE(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nested too deeply"),
            std::string::npos);
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_NE(render(ifs).find("nested too deeply"), std::string::npos);
  OJson deep = OJson::array();
  for (int i = 0; i < 1000; ++i) deep = OJson::array({deep});
  EXPECT_NE(render("{{ messages }}", deep).find("nested more than 128"), std::string::npos);
}

TEST(ChatTemplate, ConfigErrorsAreClear) {
  auto none = ChatTemplate::from_tokenizer_config_json(R"({"bos_token": "<s>"})");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  auto bad = ChatTemplate::from_tokenizer_config_json("{");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not valid JSON"), std::string::npos);
  auto named = ChatTemplate::from_tokenizer_config_json(
      R"({"chat_template": [{"name": "tool_use", "template": "x"}]})");
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("'default' not found (available: tool_use)"),
            std::string::npos)
      << named.status().to_string();
  auto picked = ChatTemplate::from_tokenizer_config_json(
      R"({"chat_template": [{"name": "tool_use", "template": "{{ bos_token }}x"}], "bos_token": {"content": "<s>"}})",
      "tool_use");
  ASSERT_TRUE(picked.ok()) << picked.status().to_string();
  auto out = picked->render(OJson::array(), false);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<s>x");
}

TEST(ChatTemplate, ModelDirPrefersChatTemplateJinjaLikeTransformers) {
  const std::string dir = ::testing::TempDir() + "rlt_chat_model_dir_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"chat_template": "from config", "bos_token": "<s>"})";
  auto from_config = ChatTemplate::from_model_dir(dir);
  ASSERT_TRUE(from_config.ok()) << from_config.status().to_string();
  EXPECT_EQ(*from_config->render(OJson::array(), false), "from config");
  std::ofstream(dir + "/chat_template.jinja") << "from jinja {{ bos_token }}\n";
  auto from_jinja = ChatTemplate::from_model_dir(dir);
  ASSERT_TRUE(from_jinja.ok()) << from_jinja.status().to_string();
  EXPECT_EQ(*from_jinja->render(OJson::array(), false), "from jinja <s>");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(ChatTemplate::from_model_dir(dir).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace rlt::tok
