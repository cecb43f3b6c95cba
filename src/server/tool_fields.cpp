// Chat request fields for function calling: tools, tool_choice, parallel_tool_calls (OpenAI's).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "server/request_parser.h"

namespace rlt::server {
namespace {

using Choice = ToolRequest::Choice;

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

bool read_tool(FieldReader& r, const json& t, size_t i, json* out) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
      !t["function"].is_object())
    return r.fail(invalid_request(
        fmt::format("{} must be {{\"type\": \"function\", \"function\": {{\"name\", "
                    "\"description\"?, \"parameters\"?}}}}",
                    where),
        "tools"));
  const json& fn = t["function"];
  for (const auto& [key, value] : fn.items()) {
    (void)value;
    if (key != "name" && key != "description" && key != "parameters" && key != "strict")
      return r.fail(invalid_request(
          fmt::format("{}.function has the unsupported field '{}'", where, key), "tools"));
  }
  const json name = fn.value("name", json());
  if (!name.is_string() || !valid_name(name.get<std::string>()))
    return r.fail(invalid_request(
        fmt::format("{}.function.name must be 1-64 letters, digits, '_' or '-', got {}", where,
                    describe_value(name)),
        "tools"));
  if (fn.contains("description") && !fn["description"].is_string())
    return r.fail(
        invalid_request(fmt::format("{}.function.description must be a string", where), "tools"));
  json parameters =
      fn.value("parameters", json::object({{"type", "object"}, {"properties", json::object()}}));
  if (!parameters.is_object())
    return r.fail(invalid_request(
        fmt::format("{}.function.parameters must be a JSON schema object", where), "tools"));
  json function = {{"name", name}};
  if (fn.contains("description")) function["description"] = fn["description"];
  function["parameters"] = std::move(parameters);
  *out = {{"type", "function"}, {"function", std::move(function)}};
  return true;
}

}  // namespace

void read_tools(FieldReader& r, GenerationRequest* out) {
  if (!r.ok()) return;
  ToolRequest& t = out->tools;
  if (const json* tools = r.find("tools")) {
    if (!tools->is_array())
      return void(r.fail(invalid_request(
          fmt::format("'tools' must be a list of tools, got {}", describe_value(*tools)),
          "tools")));
    for (size_t i = 0; i < tools->size(); ++i) {
      json tool;
      if (!read_tool(r, (*tools)[i], i, &tool)) return;
      const std::string name = tool["function"]["name"];
      for (const json& seen : t.tools) {
        if (seen["function"]["name"] == name)
          return void(r.fail(invalid_request(
              fmt::format("'tools' names the function '{}' twice", name), "tools")));
      }
      t.tools.push_back(std::move(tool));
    }
  }
  if (!t.tools.empty()) t.choice = Choice::kAuto;
  if (const json* choice = r.find("tool_choice")) {
    if (choice->is_string() && (*choice == "none" || *choice == "auto" || *choice == "required")) {
      t.choice = *choice == "none"   ? Choice::kNone
                 : *choice == "auto" ? Choice::kAuto
                                     : Choice::kRequired;
    } else if (choice->is_object() && choice->value("type", json()) == "function" &&
               choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].value("name", json()).is_string()) {
      t.choice = Choice::kNamed;
      t.named = (*choice)["function"]["name"];
      if (std::none_of(t.tools.begin(), t.tools.end(),
                       [&](const json& x) { return x["function"]["name"] == t.named; }))
        return void(r.fail(invalid_request(
            fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", t.named),
            "tool_choice")));
    } else {
      return void(r.fail(invalid_request(
          fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                      "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, got {}",
                      describe_value(*choice)),
          "tool_choice")));
    }
    if (t.tools.empty() && t.choice != Choice::kNone)
      return void(r.fail(invalid_request("'tool_choice' needs 'tools'", "tool_choice")));
  }
  r.read_bool("parallel_tool_calls", &t.parallel);
}

}  // namespace rlt::server
