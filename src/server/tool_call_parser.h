// Tool calls in a chat output, in the Hermes / Qwen convention the prompt asks for:
//
//   optional text <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call> ...
//
// Fed piece by piece as tokens arrive (streaming) or all at once: text outside the tags is the
// message's content (whitespace next to a call dropped), each well-formed block becomes a call
// (name, arguments as compact JSON text); a "</tool_call>" inside the JSON's strings does not end
// the block (the first closing tag after which the body parses does). A block that is not a JSON
// object with a string "name" and object "arguments" (or "parameters"), or that never closes,
// stays in the content verbatim, so nothing the model wrote is lost.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace rlt::server {

// JSON text parsed with nesting bounded (`max_depth`), so that later recursive walks (dump, the
// template) cannot overflow the stack; discarded when invalid or deeper.
nlohmann::ordered_json parse_bounded_json(std::string_view text, int max_depth = 64);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
};

class ToolCallParser {
 public:
  struct Delta {
    std::string content;                // content released by this piece
    std::vector<ParsedToolCall> calls;  // calls completed by this piece
  };

  // The next piece of text; `last`: the output ends with it (whatever was held back — a partial
  // tag, an unclosed block — is released).
  Delta push(const std::string& text, bool last = false);
  // Calls completed so far.
  size_t calls() const { return calls_; }

 private:
  void drain(Delta& out, bool at_end);
  std::string pending_;  // text not yet released
  bool in_call_ = false;
  bool after_call_ = false;  // drop whitespace right after a closed block
  size_t calls_ = 0;
};

// The whole output at once: content (null-equivalent when empty) and calls.
using ParsedOutput = ToolCallParser::Delta;
ParsedOutput parse_tool_calls(const std::string& text);

}  // namespace rlt::server
