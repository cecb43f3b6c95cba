// OpenAI's response shapes: non-streaming bodies, SSE chunks and logprobs for /v1/completions
// and /v1/chat/completions, plus rlt's per-token extension fields on every choice:
// "token_ids" and "exit_depths" (the loops behind each token).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/choice_decoder.h"
#include "server/tool_call_parser.h"
#include "server/generation_request.h"
#include "server/reasoning_parser.h"
#include "tokenizer/tokenizer.h"

namespace rlt::server {

using json = nlohmann::ordered_json;

// A completion choice's prompt as echo writes it: its text (as sent, or its ids decoded) and
// its token ids.
struct PromptEcho {
  std::string text;
  std::vector<int32_t> ids;
};

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;  // "cmpl-…" or "chatcmpl-…"
  int64_t created = 0;
  std::string model;
  bool logprobs = false;
  int top_logprobs = 0;        // alternatives per token in the logprobs lists
  bool include_usage = false;  // streaming: usage: null on chunks, then a usage chunk
  int n = 1;       // choices returned per prompt
  int copies = 1;  // choices generated per prompt (best_of): the best n by cumulative logprob return
  // Completions with echo: one per choice (empty without echo).
  std::vector<PromptEcho> echoes;
  // vLLM's prompt_logprobs extension: alternatives per prompt token (absent: not written).
  std::optional<int> prompt_logprobs;
  // Chat with tools: outputs are parsed for <tool_call> blocks (tool_call_parser.h).
  bool tool_calls = false;
  // Chat: the <think> block of an output becomes reasoning_content (reasoning_parser.h).
  ReasoningFormat reasoning = ReasoningFormat::kNone;

  bool echo() const { return !echoes.empty(); }
  // Whether a choice's first output comes with a prompt chunk (streaming).
  bool has_prompt_part() const { return echo() || prompt_logprobs.has_value(); }
};

// A fresh response id with the endpoint's prefix (random 128-bit hex).
std::string make_response_id(Endpoint endpoint);

json usage_json(int64_t prompt_tokens, int64_t completion_tokens);

// The whole non-streaming body once every choice finished: choices[k] is choice k % copies of
// prompt k / copies; with best_of (copies > n) each prompt's n best by cumulative logprob, best
// first. Usage counts each prompt once and every generated token.
json final_response(const ResponseMeta& meta, const std::vector<ChoiceDecoder>& choices, const tok::Tokenizer& tokenizer);

// Which of `choices` a response returns, in order (all of them unless best_of > n).
std::vector<size_t> returned_choices(const ResponseMeta& meta, const std::vector<ChoiceDecoder>& choices);

// Streaming: the role chunk opening a chat choice, then one chunk per token piece.
json chat_role_chunk(const ResponseMeta& meta, size_t index);
json token_chunk(const ResponseMeta& meta, size_t index, const TokenPiece& piece, const tok::Tokenizer& tokenizer);
// Streaming, before a completion choice's first token: the echoed prompt (text and logprobs)
// and the prompt_logprobs extension, as the request asked.
json prompt_chunk(const ResponseMeta& meta, size_t index, const ChoiceDecoder& choice, const tok::Tokenizer& tokenizer);
// A streamed tool call: one chunk with the call's index, id, name and complete arguments.
json tool_call_chunk(const ResponseMeta& meta, size_t index, size_t call_index, const ParsedToolCall& call);
json usage_chunk(const ResponseMeta& meta, int64_t prompt_tokens, int64_t completion_tokens);

// "data: <json>\n\n" (invalid UTF-8 replaced rather than thrown on).
std::string sse_event(const json& chunk);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// Compact JSON text with invalid UTF-8 replaced.
std::string dump_json(const json& value);

}  // namespace rlt::server
