#include "server/tool_call_parser.h"

#include <nlohmann/json.hpp>

namespace rlt::server {
namespace {

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(const std::string& s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.compare(s.size() - n, n, tag.substr(0, n)) == 0) return n;
  }
  return 0;
}

bool parse_call(const std::string& body, ParsedToolCall* out) {
  using json = nlohmann::ordered_json;
  json j = parse_bounded_json(body);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  json args = j.contains(key) ? j[key] : json::object();
  if (args.is_string())
    args = parse_bounded_json(args.get<std::string>());  // arguments sent as text
  if (!args.is_object()) return false;
  out->name = j["name"].get<std::string>();
  out->arguments = args.dump();
  return true;
}

}  // namespace

nlohmann::ordered_json parse_bounded_json(std::string_view text, int max_depth) {
  using json = nlohmann::ordered_json;
  bool too_deep = false;
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > max_depth) too_deep = true;
    return !too_deep;
  };
  json j = json::parse(text, limit, /*allow_exceptions=*/false);
  return too_deep ? json(json::value_t::discarded) : j;
}

void ToolCallParser::drain(Delta& out, bool at_end) {
  for (;;) {
    if (!in_call_) {
      if (after_call_) {
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty() && !at_end) return;
        after_call_ = false;
      }
      const size_t open = pending_.find(kToolCallOpen);
      if (open == std::string::npos) {
        // Hold back a partial tag and the whitespace before it (it goes if a call follows).
        size_t keep = at_end ? 0 : partial_tag(pending_, kToolCallOpen);
        if (!at_end) {
          while (keep < pending_.size() && is_space(pending_[pending_.size() - keep - 1])) ++keep;
        }
        out.content += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      size_t end = open;
      while (end > 0 && is_space(pending_[end - 1])) --end;
      out.content += pending_.substr(0, end);
      pending_.erase(0, open + kToolCallOpen.size());
      in_call_ = true;
    }
    // The first closing tag after which the body is a call (a tag may sit inside its strings).
    ParsedToolCall call;
    size_t close = pending_.find(kToolCallClose);
    while (close != std::string::npos && !parse_call(pending_.substr(0, close), &call))
      close = pending_.find(kToolCallClose, close + 1);
    if (close == std::string::npos) {
      if (at_end) {  // never closed, or not a call: the model's text, as written
        out.content += std::string(kToolCallOpen) + pending_;
        pending_.clear();
        in_call_ = false;
      }
      return;
    }
    out.calls.push_back(std::move(call));
    ++calls_;
    pending_.erase(0, close + kToolCallClose.size());
    in_call_ = false;
    after_call_ = true;
  }
}

ToolCallParser::Delta ToolCallParser::push(const std::string& text, bool last) {
  pending_ += text;
  Delta out;
  drain(out, last);
  return out;
}

ParsedOutput parse_tool_calls(const std::string& text) {
  return ToolCallParser().push(text, /*last=*/true);
}

}  // namespace rlt::server
