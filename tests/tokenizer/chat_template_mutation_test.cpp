// Randomized mutation tests of the chat-template interpreter: thousands of corrupted Jinja
// templates (deleted and repeated ranges, stray delimiters and keywords, huge ranges and
// repetitions, self-recursive macros, integers at the 64-bit ends) each end in a clean error or a
// rendered string — never a crash, a hang, an escaped exception or unbounded memory (the
// sanitizer build runs this suite too). Also the sandbox limits those mutants run into.
// RLT_MUTATION_CASES scales the case count.
#include <gtest/gtest.h>

#include "../mutation_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>

#include "tokenizer/chat_template.h"

namespace rlt::tok {
namespace {

using OJson = nlohmann::ordered_json;

using mutation::cases;

// SmolLM2's ChatML template.
const char* kChatMl =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Llama-3.1-like: {% set %}, namespace, filters, tools rendered with tojson, raise_exception.
const char* kLlama =
    "{{- bos_token }}\n"
    "{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set system_message = \"\" %}\n"
    "{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{%- if tools is not none %}\n"
    "    {%- for t in tools %}\n"
    "        {{- t | tojson(indent=4) }}\n"
    "        {{- \"\\n\\n\" }}\n"
    "    {%- endfor %}\n"
    "{%- endif %}\n"
    "{{- system_message }}\n"
    "{{- \"<|eot_id|>\" }}\n"
    "{%- set ns = namespace(turns=0) %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "    {%- endif %}\n"
    "    {%- set ns.turns = ns.turns + 1 %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n"
    "{%- endif %}\n";

// Macros, slicing, string methods, dict iteration, loop controls and printf formatting.
const char* kMacros =
    "{% macro render(m, idx) %}{{ '%d: %s' % (idx, m.role|upper) }}{% if m.content is string %}"
    "{{ m.content.strip().replace('\\n', ' ')[:200] }}{% else %}{{ m.content|tojson }}{% endif %}"
    "{% endmacro %}"
    "{% set sep = joiner(' | ') if false else ' | ' %}"
    "{% for m in messages if m.role != 'tool' %}{% if loop.index > 50 %}{% break %}{% endif %}"
    "{{ render(m, loop.index) }}{{ sep if not loop.last }}{% endfor %}"
    "{% for k, v in {'a': 1, 'b': [1, 2]}.items() %}{{ k ~ '=' ~ v|string }}{% endfor %}"
    "{{ (messages|map(attribute='role')|list|unique|join(',')) ~ (messages|length * 2) }}"
    "{% if enable_thinking is defined and enable_thinking %}<think>{% endif %}";

// Pieces a mutation inserts: delimiters, keywords and the expressions that would make an
// unbounded interpreter loop or allocate for ever.
const char* const kTemplateTokens[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", " for x in messages %}", "{% endfor %}",
    "{% if ", "{% endif %}", "{% else %}", " in ", "(", ")", "[", "]", "'", "\"", ",", "|",
    "|tojson", "|join", "|list", "|length", "|trim", "|int", "|abs", "|indent(1000000000)",
    "|tojson(indent=100000000)", "loop.index", "messages", "message['content']", "~", " + ",
    " * 1000000", " * 1000000000", "'x' * 100000000", "[0] * 100000000", "range(1000000000)",
    "range(9223372036854775806, 9223372036854775807, 5)", "9223372036854775807",
    "(-9223372036854775807 - 1)", " // -1", " % -1", "-", "** 100", "'%.5d' % 1", "'%999999999s' % 1",
    "|replace('', 'yyyyyyyy')", "raise_exception('x')", "{% set ns = namespace(x=1) %}",
    "{% set ns.x = ns.x ~ ns.x %}", "{% macro m(n) %}{{ m(n) ~ m(n) }}{% endmacro %}{{ m(1) }}",
    "{% break %}", "{% continue %}", "none", "1e309", "\xff", "\xc3", "'\\u00e9'", "{% raw %}",
    "{% endraw %}", "{% set x %}", "{% endset %}", "{% filter upper %}", "{% endfilter %}",
};

// Expressions put at the start of an output tag ("{{ X ~ rest }}") and statements put after a
// tag: they keep the template valid and send the interpreter into its error paths and limits.
const char* const kExpressions[] = {
    "'x' * 100000000 ~ ", "(range(100000)|join('x' * 1000)) ~ ", "((-9223372036854775807 - 1) // -1) ~ ",
    "(9223372036854775807 + 1) ~ ", "('%.3d' % 1) ~ ", "(messages|tojson(indent=100000000)) ~ ",
    "(messages * 100000000)|length ~ ", "undefined_name.attr ~ ", "raise_exception('boom') ~ ", "(1 / 0) ~ ",
    "[1, 2][5] ~ ", "{'a': 1}['b'] ~ ", "('x'|indent(1000000000)) ~ ", "1e309 ~ ", "(1e309|int) ~ ",
    "(messages|map(attribute='99999999999999999999')|list) ~ ", "messages.99999999999999999999 ~ ",
    "(('x' * 1000)|replace('', 'y' * 100000)) ~ ", "('%-99999999999d' % 1) ~ ", "(-(-9223372036854775807 - 1)) ~ ",
    "range(9223372036854775806, 9223372036854775807, 9)|list ~ ", "(messages|first).content * 3 ~ "};
const char* const kStatements[] = {
    "{% for i in range(1000) %}{{ i }}{% endfor %}",
    "{% macro r(n) %}{{ r(n) }}{% endmacro %}{{ r(1) }}",
    "{% macro d(n) %}{% if n > 0 %}{{ d(n - 1) }}{{ d(n - 1) }}{% endif %}{% endmacro %}{{ d(10) }}",
    "{% set x = 'ab' * 3000000 %}", "{% set l = range(10000)|list %}{{ (l * 60000)|length }}",
    "{% set ns3 = namespace(a=1) %}{% set ns3.a = [ns3] %}{{ ns3|tojson }}", "{% for c in 'h\u00e9llo' * 3 %}{{ c }}{% endfor %}",
    "{{ raise_exception('stop') }}", "{% if true %}{% break %}{% endif %}"};

std::string mutate(std::string s, std::mt19937_64& rng) {
  const int edits = rng() % 3 == 0 ? 2 : 1;
  for (int e = 0; e < edits; ++e) {
    const size_t at = s.empty() ? 0 : static_cast<size_t>(rng() % (s.size() + 1));
    switch (rng() % 8) {
      case 0:  // a range removed
        s.erase(at, static_cast<size_t>(1 + rng() % 12));
        break;
      case 1:  // a Jinja token inserted anywhere
        s.insert(at, kTemplateTokens[rng() % std::size(kTemplateTokens)]);
        break;
      case 2:  // a random byte
        if (at < s.size()) s[at] = static_cast<char>(rng());
        break;
      case 3: {  // a range repeated
        const size_t n = std::min(s.size() - std::min(at, s.size()), static_cast<size_t>(1 + rng() % 40));
        s.insert(at, s.substr(at, n));
        break;
      }
      case 4:  // truncation
        s.resize(at);
        break;
      case 5:
      case 6: {  // an expression at the start of an output tag
        const size_t tag = s.find("{{", at);
        if (tag == std::string::npos) break;
        const size_t inside = tag + (s.compare(tag, 3, "{{-") == 0 ? 3 : 2);
        s.insert(inside, std::string(" ") + kExpressions[rng() % std::size(kExpressions)]);
        break;
      }
      case 7: {  // a statement after a tag
        const size_t tag = s.find("}", at);
        if (tag == std::string::npos || tag + 1 >= s.size() || s[tag + 1] != '}') {
          const size_t end = s.find("%}", at);
          if (end != std::string::npos) s.insert(end + 2, kStatements[rng() % std::size(kStatements)]);
        } else {
          s.insert(tag + 2, kStatements[rng() % std::size(kStatements)]);
        }
        break;
      }
    }
  }
  return s;
}

TEST(ChatTemplateMutation, CorruptedTemplatesGiveCleanErrors) {
  const std::vector<std::string> bases = {kChatMl, kLlama, kMacros};
  const OJson tools = OJson::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  const std::vector<OJson> conversations = {
      OJson::parse(R"([{"role": "user", "content": "Hi"}])"),
      OJson::parse(R"([{"role": "system", "content": "Be brief.\n"}, {"role": "user", "content": "héllo 👋"},
                       {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "<|im_end|> 2+2?"}])"),
      OJson::array(),
  };
  const std::vector<OJson> extras = {
      OJson::object(), OJson{{"tools", tools}, {"bos_token", "<s>"}, {"enable_thinking", true}}};
  for (const auto& b : bases) {
    auto t = ChatTemplate::from_string(b);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    auto r = t->render(conversations[1], true, extras[1]);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
  }
  std::mt19937_64 rng(20261202);
  int syntax_errors = 0, render_errors = 0, rendered = 0;
  double slowest_s = 0;
  const int n = cases(4000);
  for (int i = 0; i < n; ++i) {
    const std::string source = mutate(bases[static_cast<size_t>(i) % bases.size()], rng);
    const auto start = std::chrono::steady_clock::now();
    auto t = ChatTemplate::from_string(source);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty()) << source;
      ++syntax_errors;
      continue;
    }
    // Two renders per template: a conversation and add_generation_prompt / extras chosen by i.
    bool any_error = false;
    for (int k = 0; k < 2; ++k) {
      const auto& messages = conversations[static_cast<size_t>(i + k) % conversations.size()];
      auto r = t->render(messages, (i + k) % 2 == 0, extras[static_cast<size_t>(k)]);
      if (!r.ok()) {
        EXPECT_FALSE(r.status().message().empty()) << source;
        any_error = true;
      }
    }
    ++(any_error ? render_errors : rendered);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    slowest_s = std::max(slowest_s, took);
  }
  std::cout << "[ mutation ] " << n << " chat template mutants: " << syntax_errors << " syntax errors, "
            << render_errors << " render errors, " << rendered << " rendered (slowest " << slowest_s << " s)\n";
  EXPECT_EQ(syntax_errors + render_errors + rendered, n);
  EXPECT_GT(syntax_errors, n / 10) << "the mutations must reach the parser's checks";
  EXPECT_GT(render_errors, n / 10) << "the mutations must reach the interpreter's checks";
  EXPECT_GT(rendered, n / 10);
}

std::string render_error(const std::string& source) {
  auto t = ChatTemplate::from_string(source);
  if (!t.ok()) return "syntax: " + t.status().message();
  auto r = t->render(OJson::array(), false);
  return r.ok() ? "" : r.status().message();
}

bool mentions(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

// The sandbox limits (src/jinja/support.h): each is an error naming the limit, reached quickly.
TEST(ChatTemplateLimits, HugeValuesAreRefusedBeforeTheyAreBuilt) {
  for (const char* source : {"{{ 'x' * 1000000000 }}", "{{ ([1, 2] * 1000000000)|length }}",
                             "{{ 'ab' * 9223372036854775807 }}", "{{ ('x' * 100000)|replace('', 'y' * 1000) }}",
                             "{{ 'x'|indent(1000000000, true) }}", "{{ [[1]]|tojson(indent=100000000) }}",
                             "{{ '%999999999s' % 1 }}", "{{ '%.99999999999f' % 1.5 }}",
                             "{{ range(100000)|join('x' * 10000) }}",
                             "{% set s = 'x' * 50000000 %}{{ s ~ s }}",
                             "{% set s = 'x' * 1000000 %}{{ (s|list)|length }}"}) {
    const std::string e = render_error(source);
    EXPECT_TRUE(mentions(e, "sandbox limit")) << source << " -> " << e;
  }
  // Within the limits the same constructs still work.
  EXPECT_EQ(render_error("{{ 'x' * 1000000 }}{{ range(3)|join('--') }}{{ 'ab'|replace('', '-') }}"), "");
  // Empty sequences repeated any number of times are empty, at once (they used to loop 2**63 times).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(render_error("{{ ('' * 9223372036854775807) ~ ([] * 9223372036854775807)|length }}"), "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

TEST(ChatTemplateLimits, RunawayLoopsAndRecursionStop) {
  const auto start = std::chrono::steady_clock::now();
  const std::string nested = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_TRUE(mentions(nested, "loop iterations")) << nested;
  // Two recursive calls per call: 2**40 calls without the step budget (the depth limit is 256).
  const std::string doubling = render_error(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}");
  EXPECT_TRUE(mentions(doubling, "macro calls")) << doubling;
  // Re-reading a long string costs its length each time: the byte budget ends the loop.
  const std::string rereads = render_error(
      "{% set s = 'x' * 20000000 %}{% for i in range(100000) %}{% if s %}{% endif %}{% endfor %}");
  EXPECT_TRUE(mentions(rereads, "MiB of strings")) << rereads;
  // Doubling a string in a loop stops at the per-value limit.
  const std::string doubled =
      render_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_TRUE(mentions(doubled, "sandbox limit")) << doubled;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 60.0);
}

TEST(ChatTemplateLimits, NamespacesCannotHoldThemselves) {
  // A cycle would leak (shared pointers) and make tojson recurse until the stack overflows.
  for (const char* source : {"{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns|tojson }}",
                             "{% set ns = namespace(a=1) %}{% set ns.a = [1, {'k': ns}] %}",
                             "{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = [b] %}"}) {
    EXPECT_TRUE(mentions(render_error(source), "reference cycle")) << source;
  }
  EXPECT_EQ(render_error("{% set a = namespace(x=1) %}{% set b = namespace(y=a) %}{% set a.x = 2 %}{{ b.y.x }}"), "");
}

TEST(ChatTemplateLimits, IntegerEdgesAreErrorsNotUndefinedBehaviour) {
  // INT64_MIN // -1 traps the CPU's division; negating INT64_MIN overflows.
  EXPECT_TRUE(mentions(render_error("{{ (-9223372036854775807 - 1) // -1 }}"), "OverflowError"));
  EXPECT_TRUE(mentions(render_error("{{ -(-9223372036854775807 - 1) }}"), "OverflowError"));
  EXPECT_TRUE(mentions(render_error("{{ (-9223372036854775807 - 1)|abs }}"), "OverflowError"));
  EXPECT_TRUE(mentions(render_error("{{ 1e300|int }}"), "OverflowError"));
  EXPECT_TRUE(mentions(render_error("{{ '%.3d' % 1 }}"), "unsupported format"));
  auto t = ChatTemplate::from_string(
      "{{ (-9223372036854775807 - 1) % -1 }} {{ range(9223372036854775806, 9223372036854775807, 5)|list }} "
      "{{ range(-9223372036854775807, -9223372036854775807 - 1, -7)|list }}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(OJson::array(), false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, "0 [9223372036854775806] [-9223372036854775807]");
}

}  // namespace
}  // namespace rlt::tok
