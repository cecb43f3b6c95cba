#include "server/prompt_builder.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "sampling/rng.h"
#include "server/tool_prompt.h"

namespace rlt::server {
namespace {

// SamplingParams' range errors begin with the field's name ("top_p must be in (0, 1], got 0",
// "stop_token_ids[2] must ..."), which is also the request field's: the error's `param`.
std::string field_named_by(const std::string& message) {
  size_t end = 0;
  while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) || message[end] == '_'))
    ++end;
  return message.substr(0, end);
}

std::optional<ApiError> tokenize(const std::string& text, bool add_special_tokens, const ModelContext& model,
                                 std::vector<int32_t>* out) {
  auto ids = model.tokenizer->encode(text, add_special_tokens);
  if (!ids.ok()) return invalid_request("the prompt could not be tokenized: " + ids.status().message(), "prompt");
  *out = std::move(*ids);
  return std::nullopt;
}

std::optional<ApiError> completion_prompts(const GenerationRequest& request, const ModelContext& model,
                                           EngineInputs* out) {
  for (const PromptInput& p : request.prompts) {
    std::vector<int32_t> ids = p.ids;
    if (p.is_text) {
      if (auto e = tokenize(p.text, true, model, &ids)) return e;
    }
    for (int32_t t : ids) {
      if (t >= model.vocab_size)
        return invalid_request(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, model.vocab_size),
                               "prompt");
    }
    out->prompts.push_back(std::move(ids));
  }
  return std::nullopt;
}

std::optional<ApiError> chat_prompt(const GenerationRequest& request, const ModelContext& model, EngineInputs* out) {
  if (!model.chat_template)
    return invalid_request("this model has no chat template (" + model.chat_template_error + "); use /v1/completions",
                           "messages");
  // Templates that read `tools` get them; others get the Hermes convention in the messages.
  const bool knows_tools = model.chat_template->source().find("tools") != std::string::npos;
  const TemplateInput in = chat_template_input(request, knows_tools);
  auto text = model.chat_template->render(in.messages, true, in.extra);
  if (!text.ok()) return invalid_request("the chat template could not render the messages: " + text.status().message(),
                                         "messages");
  std::vector<int32_t> ids;
  // The template writes the special tokens itself.
  if (auto e = tokenize(*text, false, model, &ids)) return e;
  out->prompts.push_back(std::move(ids));
  // In chat the end-of-turn tokens are the model's EOS (SmolLM2's eos is <|im_end|>), so
  // ignore_eos ignores them too, as vLLM's does; stop_token_ids the request names still stop.
  if (out->params.ignore_eos) return std::nullopt;
  for (int32_t id : model.end_of_turn_ids) {
    if (std::find(out->params.stop_token_ids.begin(), out->params.stop_token_ids.end(), id) ==
        out->params.stop_token_ids.end())
      out->params.stop_token_ids.push_back(id);
  }
  return std::nullopt;
}

constexpr int64_t kMaxPromptLogprobEntries = int64_t{1} << 20;

// n / best_of: every prompt `copies` times in a row, each copy its own seed stream. Copies of
// a prompt share its pages through the prefix cache when it is on (the scheduler lets the later
// ones wait for the first's prefill, docs/serving.md).
void expand_choices(const GenerationRequest& request, EngineInputs* out) {
  out->copies = request.copies();
  if (out->params.seed) {
    for (size_t i = 0; i < out->prompts.size(); ++i) {
      for (int j = 0; j < out->copies; ++j) {
        out->seeds.push_back(j == 0 ? *out->params.seed
                                    : sampling::derive_request_seed(*out->params.seed, fmt::format("choice {}", j)));
      }
    }
  }
  // best_of ranks choices by their cumulative logprob: every token's is needed (written out
  // only when the request asked for logprobs).
  if (out->copies > request.n && !out->params.logprobs) out->params.logprobs = 0;
  if (out->copies == 1) return;
  std::vector<std::vector<int32_t>> expanded;
  expanded.reserve(out->prompts.size() * static_cast<size_t>(out->copies));
  for (auto& p : out->prompts) {
    for (int j = 0; j + 1 < out->copies; ++j) expanded.push_back(p);
    expanded.push_back(std::move(p));
  }
  out->prompts = std::move(expanded);
}

}  // namespace

std::optional<ApiError> build_engine_inputs(const GenerationRequest& request, const ModelContext& model,
                                            EngineInputs* out) {
  out->params = request.params;
  // The engine always generates: one token, which the response leaves out.
  if (request.prompt_only()) out->params.max_tokens = 1;
  if (request.logprobs) out->params.logprobs = request.top_logprobs;
  // Echoed logprobs and vLLM's prompt_logprobs come from one scoring of the prompt, with the
  // larger number of alternatives (each list is cut to its own when written).
  if (request.echo && request.logprobs) out->params.prompt_logprobs = request.top_logprobs;
  if (request.prompt_logprobs)
    out->params.prompt_logprobs = std::max(out->params.prompt_logprobs.value_or(0), *request.prompt_logprobs);
  if (request.tools.forces_call()) {
    // A call is forced: its format and arguments through the constraint engine.
    if (out->params.structured_outputs)
      return invalid_request(fmt::format("'tool_choice' forces a tool call, and '{}' constrains the output too; send "
                                         "one", request.structured_param), "tool_choice");
    auto gbnf = tool_call_gbnf(request.tools);
    if (!gbnf.ok()) return invalid_request(gbnf.status().message(), "tools");
    out->params.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kGrammar, std::move(*gbnf), {}};
  }
  auto error = request.endpoint == Endpoint::kChat ? chat_prompt(request, model, out)
                                                   : completion_prompts(request, model, out);
  if (error) return error;
  size_t longest = 0;
  for (const auto& p : out->prompts) {
    if (p.empty()) return invalid_request("the prompt is empty after tokenization; send at least one token", "prompt");
    longest = std::max(longest, p.size());
  }
  const int64_t prompt_len = static_cast<int64_t>(longest);
  if (prompt_len > model.max_context)
    return invalid_request(fmt::format("the prompt has {} tokens; the model's context is {} tokens", prompt_len,
                                       model.max_context), "prompt");
  // Chat has no max_tokens default in OpenAI's API: generate up to the end of the context.
  if (request.endpoint == Endpoint::kChat && !request.max_tokens_given)
    out->params.max_tokens = model.max_context - prompt_len + 1;
  if (Status s = out->params.validate(model.vocab_size); !s.ok())
    return invalid_request(s.message(), field_named_by(s.message()));
  if (Status s = out->params.validate_loops(model.total_loops); !s.ok())
    return invalid_request(s.message(), field_named_by(s.message()));
  // Written so that a max_tokens near 2^63 cannot overflow the sum.
  if (out->params.max_tokens > model.max_context - prompt_len + 1)
    return invalid_request(fmt::format("prompt ({} tokens) + max_tokens ({}) - 1 exceeds the model's context of {} "
                                       "tokens; lower max_tokens", prompt_len, out->params.max_tokens, model.max_context),
                           "max_tokens");
  if (out->params.prompt_logprobs) {
    // Each scored prompt token comes back as 1 + alternatives entries per choice: bounded so that
    // one request cannot make the server build gigabytes of JSON.
    int64_t entries = 0;
    for (const auto& p : out->prompts)
      entries += (static_cast<int64_t>(p.size()) - 1) * (*out->params.prompt_logprobs + 1) * request.copies();
    if (entries > kMaxPromptLogprobEntries) {
      return invalid_request(fmt::format("prompt logprobs would return {} entries (prompt tokens x (1 + "
                                         "alternatives) x choices), more than the {} one request may; ask for fewer "
                                         "alternatives or choices, or send a shorter prompt",
                                         entries, kMaxPromptLogprobEntries),
                             request.prompt_logprobs ? "prompt_logprobs" : "logprobs");
    }
  }
  expand_choices(request, out);
  return std::nullopt;
}

}  // namespace rlt::server
