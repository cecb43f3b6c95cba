// POST /v1/completions bodies: prompt forms and the legacy completions fields.
#include <fmt/format.h>
#include <limits>

#include "server/request_parser.h"

namespace rlt::server {
namespace {

bool is_token_id(const json& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
}

bool read_ids(FieldReader& r, const json& list, PromptInput* out) {
  if (list.empty()) return r.fail(invalid_request("'prompt' token id lists must not be empty", "prompt"));
  out->is_text = false;
  for (const json& t : list) {
    if (!is_token_id(t))
      return r.fail(invalid_request(fmt::format("'prompt' token ids must be integers >= 0, got {}", describe_value(t)),
                                    "prompt"));
    out->ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return true;
}

// A string, a list of strings, a list of token ids, or a list of token id lists.
void read_prompt(FieldReader& r, const ParseLimits& limits, GenerationRequest* out) {
  const json* v = r.find("prompt");
  if (!r.ok()) return;
  if (v == nullptr) return void(r.fail(invalid_request("'prompt' is required", "prompt")));
  const char* kForms = "a string, a list of strings, a list of token ids or a list of token id lists";
  if (v->is_string()) {
    out->prompts.push_back({true, v->get<std::string>(), {}});
    return;
  }
  if (!v->is_array() || v->empty())
    return void(r.fail(invalid_request(fmt::format("'prompt' must be {}, got {}", kForms, describe_value(*v)), "prompt")));
  if (is_token_id(v->front()) || v->front().is_number()) {
    PromptInput p;
    if (read_ids(r, *v, &p)) out->prompts.push_back(std::move(p));
    return;
  }
  if (static_cast<int>(v->size()) > limits.max_prompts)
    return void(r.fail(invalid_request(fmt::format("'prompt' holds {} prompts; at most {} are allowed per request",
                                                   v->size(), limits.max_prompts), "prompt")));
  for (const json& item : *v) {
    PromptInput p;
    if (item.is_string()) {
      p.text = item.get<std::string>();
    } else if (item.is_array()) {
      if (!read_ids(r, item, &p)) return;
    } else {
      return void(r.fail(invalid_request(fmt::format("'prompt' must be {}; found an entry {}", kForms, describe_value(item)),
                                         "prompt")));
    }
    out->prompts.push_back(std::move(p));
  }
}

// best_of: that many choices generated per prompt, the n with the highest cumulative logprob
// returned; only whole responses can be chosen from, so not with streaming (as OpenAI).
void read_best_of(FieldReader& r, GenerationRequest* out) {
  if (!r.ok() || r.find("best_of") == nullptr) return;
  if (!r.read_int("best_of", &out->best_of, 1, GenerationRequest::kMaxChoices)) return;
  if (out->best_of < out->n)
    return void(r.fail(invalid_request(
        fmt::format("'best_of' ({}) must be at least 'n' ({})", out->best_of, out->n), "best_of")));
  if (out->stream && out->best_of > out->n)
    r.fail(invalid_request("'best_of' > 'n' cannot be streamed: the best choices are known only at the end", "best_of"));
}

// Fields rlt accepts only at their neutral value, so clients that send defaults keep working.
void read_neutral_fields(FieldReader& r) {
  if (r.ok() && r.find("suffix") != nullptr && !r.find("suffix")->is_null())
    r.fail(invalid_request("'suffix' is not supported; omit it", "suffix"));
}

}  // namespace

std::optional<ApiError> parse_completion_request(const json& body, const ParseLimits& limits, GenerationRequest* out) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body);
  out->endpoint = Endpoint::kCompletions;
  r.only_known({"model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n",
                "presence_penalty", "frequency_penalty", "repetition_penalty", "stream", "stream_options", "user",
                "logprobs", "echo", "best_of", "suffix", "logit_bias", "min_loops", "max_loops", "exit_threshold", "exit_criterion", "exit_criterion_threshold",
                "priority", "ignore_eos", "stop_token_ids", "response_format", "structured_outputs", "guided_json",
                "speculative", "guided_regex", "guided_grammar", "guided_choice", "prompt_logprobs"});
  if (r.ok()) read_common_fields(r, limits, out);
  read_prompt(r, limits, out);
  if (r.ok() && r.find("logprobs") != nullptr) {
    int n = 0;
    if (r.read_int("logprobs", &n, 0, SamplingParams::kMaxLogprobs)) {
      out->logprobs = true;
      out->top_logprobs = n;
    }
  }
  r.read_bool("echo", &out->echo);
  if (r.ok() && out->params.max_tokens == 0 && !out->echo)
    r.fail(invalid_request("'max_tokens' = 0 generates nothing; it is allowed only with 'echo': true (the prompt "
                           "scored, as OpenAI's legacy API); send at least 1",
                           "max_tokens"));
  if (r.ok() && r.find("prompt_logprobs") != nullptr) {
    int n = 0;
    if (r.read_int("prompt_logprobs", &n, 0, SamplingParams::kMaxLogprobs)) out->prompt_logprobs = n;
  }
  read_best_of(r, out);
  read_neutral_fields(r);
  if (r.ok() && out->copies() > 1 &&
      out->prompts.size() * static_cast<size_t>(out->copies()) > GenerationRequest::kMaxChoices) {
    r.fail(invalid_request(fmt::format("{} prompts x {} choices each exceed the limit of {} choices per request",
                                       out->prompts.size(), out->copies(), GenerationRequest::kMaxChoices),
                           out->best_of > 0 ? "best_of" : "n"));
  }
  return r.error();
}

}  // namespace rlt::server
