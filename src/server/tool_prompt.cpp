#include "server/tool_prompt.h"

#include <fmt/format.h>

#include "server/tool_call_parser.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"

namespace rlt::server {
namespace {

using json = nlohmann::ordered_json;

std::string hermes_instructions(const json& tools) {
  std::string out =
      "You may call functions to answer. The functions, with their parameters as JSON schemas, are "
      "listed "
      "within <tools></tools> tags:\n<tools>\n";
  for (const json& t : tools) out += t.dump() + "\n";
  out +=
      "</tools>\nTo call a function, reply with a JSON object holding its name and its arguments "
      "within "
      "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
      "<arguments object>}\n"
      "</tool_call>";
  return out;
}

// {"name", "arguments"} of an OpenAI tool call, arguments parsed to an object when they are JSON.
json call_object(const json& call) {
  const json& fn = call["function"];
  json args = parse_bounded_json(fn.value("arguments", std::string("{}")));
  if (args.is_discarded()) args = fn.value("arguments", std::string("{}"));
  return {{"name", fn["name"]}, {"arguments", std::move(args)}};
}

}  // namespace

TemplateInput chat_template_input(const GenerationRequest& request, bool template_knows_tools) {
  TemplateInput in{json::array(), request.template_kwargs};
  const bool offer = request.tools.active();
  if (template_knows_tools) {
    if (offer) in.extra["tools"] = request.tools.tools;
    for (json m : request.messages) {
      if (m.contains("tool_calls")) {
        for (json& c : m["tool_calls"]) c["function"]["arguments"] = call_object(c)["arguments"];
      }
      in.messages.push_back(std::move(m));
    }
    return in;
  }
  // The Hermes convention, written into the conversation.
  bool instructed = !offer;
  for (const json& m : request.messages) {
    json out = m;
    if (!instructed && m["role"] == "system") {
      out["content"] =
          m["content"].get<std::string>() + "\n\n" + hermes_instructions(request.tools.tools);
      instructed = true;
    }
    if (m.contains("tool_calls")) {
      std::string content = m["content"].get<std::string>();
      for (const json& c : m["tool_calls"]) {
        if (!content.empty()) content += '\n';
        content += "<tool_call>\n";
        content += call_object(c).dump();
        content += "\n</tool_call>";
      }
      out = {{"role", "assistant"}, {"content", content}};
    } else if (m["role"] == "tool") {
      out = {{"role", "user"},
             {"content",
              "<tool_response>\n" + m["content"].get<std::string>() + "\n</tool_response>"}};
    }
    in.messages.push_back(std::move(out));
  }
  if (!instructed) {
    in.messages.insert(
        in.messages.begin(),
        json{{"role", "system"}, {"content", hermes_instructions(request.tools.tools)}});
  }
  return in;
}

Result<std::string> tool_call_gbnf(const ToolRequest& tools) {
  std::string rules, names;
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const json& fn = tools.tools[i]["function"];
    const std::string name = fn["name"];
    if (tools.choice == ToolRequest::Choice::kNamed && name != tools.named) continue;
    structured::JsonGbnfOptions options;
    options.root = fmt::format("tool-args-{}", i);
    options.prefix = fmt::format("t{}-", i);
    options.primitives = false;
    auto args = structured::json_schema_to_gbnf(fn["parameters"].dump(), options);
    if (!args.ok())
      return invalid_argument(fmt::format("tool '{}': {}", name, args.status().message()));
    rules += *args;
    names += (names.empty() ? "" : " | ") + structured::gbnf_literal(json(name).dump()) +
             " ws \",\" ws " + structured::gbnf_literal("\"arguments\"") + " ws \":\" ws " +
             options.root;
  }
  std::string out =
      tools.parallel ? "root ::= call-block (ws call-block)*\n" : "root ::= call-block\n";
  out += "call-block ::= \"<tool_call>\" ws \"{\" ws " + structured::gbnf_literal("\"name\"") +
         " ws \":\" ws (" + names + ") ws \"}\" ws \"</tool_call>\"\n";
  return out + rules + structured::json_gbnf_primitives();
}

}  // namespace rlt::server
