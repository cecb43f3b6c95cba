// POST /v1/chat/completions bodies: messages and the chat-only fields.
#include <fmt/format.h>
#include <limits>

#include "server/request_parser.h"

namespace rlt::server {
namespace {

// Content may be a string or a list of {"type": "text", "text": ...} parts; templates expect a
// string, so parts are joined.
bool read_content(FieldReader& r, const json& content, size_t index, std::string* out) {
  const std::string where = fmt::format("messages[{}].content", index);
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (content.is_array()) {
    for (const json& part : content) {
      if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") || !part["text"].is_string())
        return r.fail(invalid_request(fmt::format("{}: only text parts {{\"type\": \"text\", \"text\": ...}} are supported, "
                                                  "got {}", where, describe_value(part)), "messages"));
      *out += part["text"].get<std::string>();
    }
    return true;
  }
  return r.fail(invalid_request(fmt::format("{} must be a string or a list of text parts, got {}", where,
                                            describe_value(content)), "messages"));
}

}  // namespace

// An assistant message's tool_calls, as OpenAI sends them back: [{id, type: "function",
// function: {name, arguments: JSON text}}].
static bool read_tool_calls(FieldReader& r, const json& calls, size_t index, json* out) {
  const std::string where = fmt::format("messages[{}].tool_calls", index);
  if (!calls.is_array())
    return r.fail(invalid_request(fmt::format("{} must be a list, got {}", where, describe_value(calls)), "messages"));
  *out = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const json* fn = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string() ||
        (fn->contains("arguments") && !(*fn)["arguments"].is_string()))
      return r.fail(invalid_request(fmt::format("{}[{}] must be {{\"id\", \"type\": \"function\", \"function\": "
                                                "{{\"name\": string, \"arguments\": JSON text}}}}", where, k),
                                    "messages"));
    json call = {{"id", c.value("id", json(""))}, {"type", "function"},
                 {"function", {{"name", (*fn)["name"]}, {"arguments", fn->value("arguments", json("{}"))}}}};
    out->push_back(std::move(call));
  }
  return true;
}

void read_messages(FieldReader& r, GenerationRequest* out) {
  const json* v = r.find("messages");
  if (!r.ok()) return;
  if (v == nullptr) return void(r.fail(invalid_request("'messages' is required", "messages")));
  if (!v->is_array() || v->empty())
    return void(r.fail(invalid_request(fmt::format("'messages' must be a non-empty list of messages, got {}",
                                                   describe_value(*v)), "messages")));
  out->messages = json::array();
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object())
      return void(r.fail(invalid_request(fmt::format("messages[{}] must be an object, got {}", i, describe_value(m)),
                                         "messages")));
    for (const auto& [key, value] : m.items()) {
      if (key != "role" && key != "content" && key != "name" && key != "tool_calls" && key != "tool_call_id")
        return void(r.fail(invalid_request(fmt::format("messages[{}] has the unsupported field '{}' (rlt takes role, "
                                                       "content, name, tool_calls and tool_call_id)", i, key), "messages")));
    }
    json role = m.value("role", json());
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (!role.is_string() || (role != "system" && role != "user" && role != "assistant" && role != "tool"))
      return void(r.fail(invalid_request(fmt::format("messages[{}].role must be \"system\", \"developer\", \"user\", "
                                                     "\"assistant\" or \"tool\", got {}", i, describe_value(role)),
                                         "messages")));
    json msg = json::object();
    msg["role"] = role;
    const bool has_calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (m.contains("tool_calls") && !m["tool_calls"].is_null() && role != "assistant")
      return void(r.fail(invalid_request(fmt::format("messages[{}].tool_calls is only for assistant messages", i),
                                         "messages")));
    // An assistant message that calls tools may have no content.
    if (!m.contains("content") || m["content"].is_null()) {
      if (!has_calls)
        return void(r.fail(invalid_request(fmt::format("messages[{}].content is required", i), "messages")));
      msg["content"] = "";
    } else {
      std::string content;
      if (!read_content(r, m["content"], i, &content)) return;
      msg["content"] = std::move(content);
    }
    if (has_calls) {
      json calls;
      if (!read_tool_calls(r, m["tool_calls"], i, &calls)) return;
      msg["tool_calls"] = std::move(calls);
    }
    if (role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        return void(r.fail(invalid_request(fmt::format("messages[{}] (role \"tool\") needs a string tool_call_id", i),
                                           "messages")));
      msg["tool_call_id"] = m["tool_call_id"];
    }
    if (m.contains("name")) {
      if (!m["name"].is_string())
        return void(r.fail(invalid_request(fmt::format("messages[{}].name must be a string", i), "messages")));
      msg["name"] = m["name"];
    }
    out->messages.push_back(std::move(msg));
  }
}

std::optional<ApiError> parse_chat_request(const json& body, const ParseLimits& limits, GenerationRequest* out) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body);
  out->endpoint = Endpoint::kChat;
  r.only_known({"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
                "seed", "stop", "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "stream",
                "stream_options", "user", "logprobs", "top_logprobs", "logit_bias", "chat_template_kwargs", "min_loops",
                "max_loops", "exit_threshold", "exit_criterion", "exit_criterion_threshold", "priority", "ignore_eos", "stop_token_ids", "response_format", "structured_outputs", "guided_json",
                "speculative", "guided_regex", "guided_grammar", "guided_choice", "tools", "tool_choice", "parallel_tool_calls"});
  if (r.ok()) read_common_fields(r, limits, out);
  // max_completion_tokens is the newer name; it wins when both are sent.
  if (r.ok() && r.find("max_completion_tokens") != nullptr) {
    out->max_tokens_given = true;
    r.read_int("max_completion_tokens", &out->params.max_tokens, 1, std::numeric_limits<int64_t>::max());
  }
  read_messages(r, out);
  read_tools(r, out);
  r.read_bool("logprobs", &out->logprobs);
  if (r.ok() && r.find("top_logprobs") != nullptr) {
    r.read_int("top_logprobs", &out->top_logprobs, 0, SamplingParams::kMaxLogprobs);
    if (r.ok() && !out->logprobs)
      r.fail(invalid_request("'top_logprobs' needs \"logprobs\": true", "top_logprobs"));
  }
  const json* kwargs = r.find("chat_template_kwargs");
  if (r.ok() && kwargs != nullptr) {
    if (!kwargs->is_object())
      r.fail(invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs"));
    else
      out->template_kwargs = *kwargs;
  }
  return r.error();
}

}  // namespace rlt::server
