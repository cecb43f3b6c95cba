// The prompt side of function calling: what the chat template renders for a request with tools,
// and the grammar that forces a call (tool_choice "required" or a named function).
//
// A template that reads `tools` (Qwen, Hermes, Llama 3.1, ...) gets them as transformers'
// apply_chat_template(tools=...) passes them, assistant tool_calls with their arguments as
// objects, and tool messages as they are. A template that does not (SmolLM2's ChatML) gets the
// Hermes convention written into the conversation: the tools and the <tool_call> format in the
// system message, earlier calls as <tool_call> blocks in the assistant's content, and tool
// results as user messages in <tool_response> tags — the format tool_call_parser.h reads back.
#pragma once

#include <string>

#include "rlt/status.h"
#include "server/generation_request.h"

namespace rlt::server {

struct TemplateInput {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json extra;  // template variables (chat_template_kwargs, tools)
};

TemplateInput chat_template_input(const GenerationRequest& request, bool template_knows_tools);

// The GBNF of one call (or, with parallel_tool_calls, one or more) in the <tool_call> format, the
// arguments constrained by the function's parameters schema. Errors name the unsupported schema
// feature and the tool.
Result<std::string> tool_call_gbnf(const ToolRequest& tools);

}  // namespace rlt::server
