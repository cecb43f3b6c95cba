// Function calling's parts: request fields, the Hermes <tool_call> parser (whole and streamed),
// the forced-call grammar and what the chat template receives.
#include <gtest/gtest.h>

#include <random>

#include "server/request_parser.h"
#include "server/tool_call_parser.h"
#include "server/tool_prompt.h"
#include "structured/gbnf.h"
#include "structured/matcher.h"

namespace rlt::server {
namespace {

TEST(ToolCallParser, SplitsContentAndCalls) {
  auto p = parse_tool_calls(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n"
      "</tool_call>\n<tool_call>{\"name\":\"now\",\"arguments\":{}}</tool_call>");
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(p.calls[1].name, "now");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  auto string_args =
      parse_tool_calls(R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)");
  ASSERT_EQ(string_args.calls.size(), 1u);
  EXPECT_EQ(string_args.calls[0].arguments, R"({"x":1})");
}

TEST(ToolCallParser, ClosingTagsInsideStringsDoNotEndTheBlock) {
  auto p = parse_tool_calls(R"(<tool_call>{"name":"f","arguments":{"s":"</tool_call>"}}</tool_call>)");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"s":"</tool_call>"})");
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallParser, DeeplyNestedArgumentsAreRefusedNotRecursedInto) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto p = parse_tool_calls("<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":" + deep + "}}</tool_call>");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_TRUE(parse_bounded_json(deep).is_discarded());
}

TEST(ToolCallParser, MalformedOrUnclosedBlocksStayContent) {
  EXPECT_EQ(parse_tool_calls("no calls <tool_ here").content, "no calls <tool_ here");
  auto bad = parse_tool_calls("<tool_call>{not json}</tool_call>");
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{not json}</tool_call>");
  auto unclosed = parse_tool_calls("a <tool_call>{\"name\": \"f\"");
  EXPECT_TRUE(unclosed.calls.empty());
  EXPECT_EQ(unclosed.content, "a<tool_call>{\"name\": \"f\"");
  auto no_name = parse_tool_calls("<tool_call>{\"arguments\": {}}</tool_call>");
  EXPECT_TRUE(no_name.calls.empty());
}

TEST(ToolCallParser, StreamingInAnyPiecesEqualsTheWhole) {
  const std::string text =
      "Sure.  <tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": "
      "\"<tool_call>?\"}}\n</tool_call> "
      "then <tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call> done <tool_c";
  const ParsedOutput whole = parse_tool_calls(text);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    ToolCallParser p;
    std::string content;
    std::vector<ParsedToolCall> calls;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = 1 + rng() % 7;
      auto d = p.push(text.substr(i, n));
      content += d.content;
      for (auto& c : d.calls) calls.push_back(c);
      i += n;
    }
    auto d = p.push("", /*last=*/true);
    content += d.content;
    for (auto& c : d.calls) calls.push_back(c);
    EXPECT_EQ(content, whole.content);
    ASSERT_EQ(calls.size(), whole.calls.size());
    for (size_t k = 0; k < calls.size(); ++k)
      EXPECT_EQ(calls[k].arguments, whole.calls[k].arguments);
  }
  EXPECT_EQ(whole.calls.size(), 2u);
}

GenerationRequest parse_chat(const std::string& body, std::optional<ApiError>* error = nullptr) {
  GenerationRequest g;
  auto e = parse_chat_request(json::parse(body), ParseLimits{}, &g);
  if (error)
    *error = e;
  else
    EXPECT_FALSE(e) << e->message;
  return g;
}

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now",
    "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["C","F"]}},"required":["city"]}}},
    {"type":"function","function":{"name":"now"}}])";

TEST(ToolFields, ChoicesAndHistory) {
  auto g = parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + kTools + "}");
  EXPECT_EQ(g.tools.choice, ToolRequest::Choice::kAuto);
  EXPECT_EQ(g.tools.tools.size(), 2u);
  auto named = parse_chat(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + kTools +
      R"(,"tool_choice":{"type":"function","function":{"name":"now"}},"parallel_tool_calls":false})");
  EXPECT_EQ(named.tools.choice, ToolRequest::Choice::kNamed);
  EXPECT_EQ(named.tools.named, "now");
  EXPECT_FALSE(named.tools.parallel);
  auto history = parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"12:00"}],)" +
                            kTools + "}");
  EXPECT_EQ(history.messages[1]["tool_calls"][0]["function"]["name"], "now");
  EXPECT_EQ(history.messages[2]["role"], "tool");
  std::optional<ApiError> e;
  parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"})",
             &e);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tool_choice");
  parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + kTools +
                 R"(,"tool_choice":{"type":"function","function":{"name":"nope"}}})",
             &e);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("'nope'"), std::string::npos);
  parse_chat(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
      &e);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
  parse_chat(R"({"model":"m","messages":[{"role":"tool","content":"x"}]})", &e);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("tool_call_id"), std::string::npos);
}

TEST(ToolPrompt, ForcedCallGrammarAcceptsExactlyValidCalls) {
  auto g = parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],)" + kTools +
                      R"(,"tool_choice":"required"})");
  auto gbnf = tool_call_gbnf(g.tools);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().to_string();
  auto grammar = structured::parse_gbnf(*gbnf);
  ASSERT_TRUE(grammar.ok()) << grammar.status().to_string();
  std::vector<std::optional<std::string>> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  auto compiled = std::make_shared<const structured::CompiledGrammar>(
      std::move(*grammar),
      std::make_shared<const structured::TokenVocabulary>(bytes, bytes.size()));
  const auto matches = [&](const std::string& text) {
    structured::GrammarMatcher m(compiled, {});
    return m.accept_bytes(text) && m.is_complete();
  };
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"C\"}}\n</tool_call>";
  EXPECT_TRUE(matches(call));
  EXPECT_TRUE(matches(
      call + "\n<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>"));  // parallel
  EXPECT_FALSE(matches(
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"C\"}}</tool_call>"));
  EXPECT_FALSE(matches("<tool_call>{\"name\": \"other\", \"arguments\": {}}</tool_call>"));
  EXPECT_FALSE(matches("Sure! " + call));
  const ParsedOutput parsed = parse_tool_calls(call);
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].arguments, R"({"city":"Paris","unit":"C"})");
}

TEST(ToolPrompt, DeepArgumentsInTheHistoryStayText) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  GenerationRequest g;
  json call = {{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", deep}}}};
  json assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({call})}};
  g.messages = json::array({json{{"role", "user"}, {"content", "x"}}, assistant});
  const TemplateInput in = chat_template_input(g, /*template_knows_tools=*/true);
  EXPECT_TRUE(in.messages[1]["tool_calls"][0]["function"]["arguments"].is_string());
}

TEST(ToolPrompt, TemplatesWithoutToolsGetTheHermesConvention) {
  auto g = parse_chat(R"({"model":"m","messages":[{"role":"user","content":"x"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"now","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"c","content":"12:00"}],)" +
                      kTools + "}");
  const TemplateInput plain = chat_template_input(g, /*template_knows_tools=*/false);
  ASSERT_EQ(plain.messages.size(), 4u);
  EXPECT_EQ(plain.messages[0]["role"], "system");
  EXPECT_NE(plain.messages[0]["content"].get<std::string>().find("get_weather"), std::string::npos);
  EXPECT_EQ(plain.messages[2]["content"],
            "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>");
  EXPECT_EQ(plain.messages[3]["role"], "user");
  EXPECT_EQ(plain.messages[3]["content"], "<tool_response>\n12:00\n</tool_response>");
  EXPECT_FALSE(plain.extra.contains("tools"));
  const TemplateInput native = chat_template_input(g, /*template_knows_tools=*/true);
  EXPECT_EQ(native.extra["tools"].size(), 2u);
  EXPECT_TRUE(native.messages[1]["tool_calls"][0]["function"]["arguments"].is_object());
  EXPECT_EQ(native.messages[2]["role"], "tool");
}

}  // namespace
}  // namespace rlt::server
