// A parsed and type-checked /v1/completions or /v1/chat/completions body: plain data handed from
// the request parser to the prompt builder and the response writers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rlt/sampling_params.h"

namespace rlt::server {

enum class Endpoint { kCompletions, kChat };

// One prompt as the client sent it: text to tokenize, or token ids to use as they are.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

// Chat's function calling: the tools offered and how the model may use them.
struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // [{"type": "function", "function": {...}}]
  Choice choice = Choice::kNone;  // "auto" by default when tools are given (OpenAI)
  std::string named;              // kNamed: the function that must be called
  bool parallel = true;           // parallel_tool_calls: several calls in one reply
  // Tools reach the prompt and outputs are parsed for calls.
  bool active() const { return choice != Choice::kNone; }
  // A call is forced (required or named): the output is a call through the constraint engine.
  bool forces_call() const { return choice == Choice::kRequired || choice == Choice::kNamed; }
};

struct GenerationRequest {
  // Choices one request may ask for: prompts × max(n, best_of) (OpenAI's limit for n).
  static constexpr int kMaxChoices = 128;

  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<PromptInput> prompts;          // completions: one choice per prompt
  nlohmann::ordered_json messages;           // chat: messages with string contents
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  SamplingParams params;                     // logprobs / stop ids not final until the prompt builder
  bool max_tokens_given = false;             // chat defaults to the rest of the context
  std::vector<std::string> stop;             // stop strings (never part of the returned text)
  bool logprobs = false;                     // return per-token logprobs
  int top_logprobs = 0;                      // alternatives per token
  int n = 1;                                 // choices returned per prompt
  int best_of = 0;                           // completions: choices generated per prompt (0: n)
  bool echo = false;                         // completions: the prompt before the completion
  std::optional<int> prompt_logprobs;        // completions: vLLM's prompt_logprobs (alternatives)
  bool stream = false;
  bool include_usage = false;                // stream_options.include_usage
  std::string structured_param;              // the field that set params.structured_outputs
  ToolRequest tools;                         // chat: tools, tool_choice, parallel_tool_calls

  // Engine requests per prompt: best_of when given, else n.
  int copies() const { return best_of > 0 ? best_of : n; }
  // max_tokens 0 with echo: the prompt returned (and scored), nothing generated.
  bool prompt_only() const { return echo && params.max_tokens == 0; }
};

}  // namespace rlt::server
