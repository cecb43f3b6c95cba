// Parses /v1/completions and /v1/chat/completions bodies into GenerationRequest: types, ranges
// that do not depend on the model, unsupported fields and values. Model-dependent checks
// (vocabulary, depth, context length) happen in the prompt builder once prompts are tokenized.
#pragma once

#include <optional>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/request_fields.h"

namespace rlt::server {

struct ParseLimits {
  int max_prompts = 16;  // prompts in one completions body
  int max_stop = 16;     // stop strings per request
};

std::optional<ApiError> parse_completion_request(const json& body, const ParseLimits& limits, GenerationRequest* out);
std::optional<ApiError> parse_chat_request(const json& body, const ParseLimits& limits, GenerationRequest* out);

// Fields both endpoints share (sampling, stop, streaming, rlt's depth extensions).
void read_common_fields(FieldReader& r, const ParseLimits& limits, GenerationRequest* out);
// response_format, structured_outputs and guided_*: at most one constraint, into
// out->params.structured_outputs (compiled against the vocabulary before queueing).
void read_structured_outputs(FieldReader& r, GenerationRequest* out);
// Chat's tools, tool_choice and parallel_tool_calls into out->tools.
void read_tools(FieldReader& r, GenerationRequest* out);
// A chat body's "messages" into out->messages (roles, text contents; /tokenize reads them too).
void read_messages(FieldReader& r, GenerationRequest* out);

}  // namespace rlt::server
