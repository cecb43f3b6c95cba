// Randomized mutation tests of request-body parsing: thousands of corrupted /v1/completions and
// /v1/chat/completions bodies (byte edits, truncations, JSON tokens of every type, huge and
// non-finite numbers, invalid UTF-8, deep nesting; values replaced by values of another type or
// extreme ones, keys deleted or repeated) go through everything the HTTP thread does with a body
// before queueing it — parse_json_body, the endpoint's parser, build_engine_inputs with the demo
// model — and each ends in a 4xx ApiError with a message or in valid engine inputs: never a
// crash, an escaped exception or a 5xx (the sanitizer build runs this suite too).
// RLT_MUTATION_CASES scales the case count.
#include <gtest/gtest.h>

#include "../mutation_util.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>

#include "demo_model.h"
#include "server/model_context.h"
#include "server/prompt_builder.h"
#include "server/request_parser.h"
#include "structured/grammar_compiler.h"
#include "tokenizer/token_bytes.h"

namespace rlt::server {
namespace {

using mutation::cases;

const ModelContext& demo() { return testing::demo_context(); }

// The demo model with a Llama-3-like template that reads chat_template_kwargs and tools, so
// mutated kwargs reach a template that uses them.
const ModelContext& kwargs_model() {
  static const ModelContext m = [] {
    ModelContext c = demo();
    auto t = tok::ChatTemplate::from_string(
        "{%- set ns = namespace(sys='') %}{%- if messages[0]['role'] == 'system' %}"
        "{%- set ns.sys = messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- endif %}"
        "<|im_start|>system\n{{ ns.sys }}{% if tools is not none %}{% for t in tools %}{{ t|tojson }}{% endfor %}"
        "{% endif %}{% if date_string is defined %} {{ date_string|string }}{% endif %}<|im_end|>\n"
        "{%- for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('roles must alternate') }}{% endif %}"
        "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n"
        "{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n{% endif %}{% endif %}");
    if (!t.ok()) throw std::runtime_error(t.status().to_string());
    c.chat_template = std::move(*t);
    return c;
  }();
  return m;
}

struct Base {
  bool chat;
  std::string body;
};

const std::vector<Base>& bases() {
  static const std::vector<Base> b = {
      {false, R"({"model": "demo", "prompt": "Hello there", "max_tokens": 5, "temperature": 0.7, "top_p": 0.9,
        "top_k": 40, "min_p": 0.05, "seed": 42, "stop": ["\n", "END"], "n": 1, "presence_penalty": 0.1,
        "frequency_penalty": 0.2, "repetition_penalty": 1.1, "stream": true, "stream_options": {"include_usage": true},
        "user": "u1", "logprobs": 2, "echo": true, "best_of": 1, "logit_bias": {"5": -100, "6": 2.5},
        "min_loops": 1, "max_loops": 4, "exit_threshold": 0.5, "priority": 3, "ignore_eos": false,
        "stop_token_ids": [0, 2], "prompt_logprobs": 1})"},
      {false, R"({"model": "demo", "prompt": ["ab", "h\u00e9llo \ud83d\udc4b", "<|im_start|>x"], "max_tokens": 3,
        "suffix": null, "temperature": null, "echo": false, "logprobs": 0})"},
      {false, R"({"model": "demo", "prompt": [5, 6, 7, 258], "logprobs": 5, "echo": true, "max_tokens": 1,
        "stop": "x", "seed": 0})"},
      {false, R"({"model": "demo", "prompt": [[5, 6], [7], [0, 1, 2]], "stop_token_ids": [], "max_tokens": 2,
        "prompt_logprobs": 0, "ignore_eos": true, "priority": -5})"},
      {true, R"({"model": "demo", "messages": [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi", "name": "bob"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "!"}]},
        {"role": "user", "content": "h\u00e9llo"}], "max_completion_tokens": 8, "logprobs": true, "top_logprobs": 3,
        "chat_template_kwargs": {"enable_thinking": false, "date_string": "26 Jul 2024",
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
        "stream": false, "stop": ["\n\n"], "min_loops": 2, "exit_threshold": 0.9, "seed": 7,
        "logit_bias": {"3": 1}, "stop_token_ids": [4]})"},
      {true, R"({"model": "demo", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": null,
        "temperature": 0, "top_k": -1, "n": 1, "stream": true, "stream_options": {"include_usage": false},
        "user": "x", "max_loops": 2, "priority": 0, "ignore_eos": true})"},
      {false, R"({"model": "demo", "prompt": "JSON:", "max_tokens": 4, "structured_outputs": {"json": {"type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"enum": ["x", null]},
        "c": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 2}}, "required": ["a"]}}})"},
      {true, R"({"model": "demo", "messages": [{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "user", "content": "And tomorrow?"}], "max_tokens": 4,
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]+$"}},
          "required": ["city"]}}}], "tool_choice": "required", "parallel_tool_calls": false})"},
      {true, R"({"model": "demo", "messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
          "schema": {"$defs": {"p": {"type": "number", "exclusiveMinimum": 0}}, "anyOf": [{"$ref": "#/$defs/p"},
          {"type": "string", "format": "date"}]}}}})"},
  };
  return b;
}

// A value of another type, or an extreme one.
json odd_value(std::mt19937_64& rng) {
  switch (rng() % 18) {
    case 0: return nullptr;
    case 1: return true;
    case 2: return -1;
    case 3: return 0;
    case 4: return int64_t{1} << 31;
    case 5: return std::numeric_limits<int64_t>::max();
    case 6: return std::numeric_limits<int64_t>::min();
    case 7: return std::numeric_limits<uint64_t>::max();
    case 8: return 1e308;
    case 9: return -1e-308;
    case 10: return 0.5;
    case 11: return "";
    case 12: return "x";
    case 13: return json::array();
    case 14: return json::object();
    case 15: return std::string(5000, 'a');
    case 16: return json::array({1, "a", nullptr});
    default: {  // nesting at the parser's depth limit, and past it
      json deep = json::array();
      for (int k = 0, n = 28 + static_cast<int>(rng() % 8); k < n; ++k) deep = json::array({deep});
      return deep;
    }
  }
}

std::string mutate_structure(const std::string& text, std::mt19937_64& rng) {
  return mutation::mutate_structure<json>(text, rng, odd_value);
}

const char* const kTokens[] = {"null", "true", "-1", "1e309", "-1e309", "\"x\"", "[]", "{}", "0", "0.0",
                               "99999999999999999999", "18446744073709551616", "-9223372036854775809", "\xff",
                               "\"\xc3\"", ",", ":", "\"", "\"\\ud800\"", "\"\\u0000\"", "NaN",
                               "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "{\"a\":{\"a\":{\"a\":{\"a\":"};

std::string mutate_text(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = static_cast<size_t>(rng() % s.size());
    switch (rng() % 5) {
      case 0: s[at] = static_cast<char>(rng()); break;
      case 1: s.resize(at); break;
      case 2: s.insert(at, kTokens[rng() % std::size(kTokens)]); break;
      case 3: s.erase(at, static_cast<size_t>(1 + rng() % 12)); break;
      case 4: s.insert(at, s.substr(at, static_cast<size_t>(1 + rng() % 40))); break;
    }
  }
  return s;
}

struct Outcome {
  int json_errors = 0, parse_errors = 0, input_errors = 0, accepted = 0;
  std::string last_error;
};

// A refusal must be the client's fault (4xx; 404 is only for an unknown model name, which the
// handler checks later, so never here) and say what is wrong.
void expect_client_error(const ApiError& e, const std::string& body, Outcome& out) {
  out.last_error = e.message;
  EXPECT_GE(e.status, 400) << body;
  EXPECT_LT(e.status, 500) << e.message << "\n" << body;
  EXPECT_NE(e.status, 404) << e.message << "\n" << body;
  EXPECT_FALSE(e.message.empty()) << body;
}

// What an HTTP thread does with a body before the engine sees it.
void handle(const std::string& body, bool chat, const ModelContext& model, Outcome& out) {
  json parsed;
  if (auto e = parse_json_body(body, &parsed)) {
    expect_client_error(*e, body, out);
    ++out.json_errors;
    return;
  }
  GenerationRequest request;
  if (auto e = chat ? parse_chat_request(parsed, {}, &request) : parse_completion_request(parsed, {}, &request)) {
    expect_client_error(*e, body, out);
    ++out.parse_errors;
    return;
  }
  EngineInputs in;
  if (auto e = build_engine_inputs(request, model, &in)) {
    expect_client_error(*e, body, out);
    ++out.input_errors;
    return;
  }
  if (in.params.structured_outputs) {
    // What the engine worker does next: compile the constraint (a 400 when it cannot).
    static structured::GrammarCompiler compiler(std::make_shared<const structured::TokenVocabulary>(
        tok::token_byte_strings(*model.tokenizer), static_cast<size_t>(model.vocab_size)));
    auto g = compiler.compile(*in.params.structured_outputs);
    if (!g.ok()) {
      EXPECT_EQ(g.status().code(), ErrorCode::kInvalidArgument) << g.status().to_string() << "\n" << body;
      ++out.input_errors;
      return;
    }
  }
  ++out.accepted;
  EXPECT_FALSE(in.prompts.empty()) << body;
  for (const auto& p : in.prompts) {
    EXPECT_FALSE(p.empty()) << body;
    for (int32_t id : p) EXPECT_TRUE(id >= 0 && id < model.vocab_size) << id << "\n" << body;
    EXPECT_LE(static_cast<int64_t>(p.size()) + in.params.max_tokens - 1, model.max_context) << body;
  }
  EXPECT_GE(in.params.max_tokens, 1) << body;
}

TEST(RequestMutation, CorruptedBodiesGiveClientErrors) {
  for (const Base& b : bases()) {
    Outcome o;
    handle(b.body, b.chat, b.chat ? kwargs_model() : demo(), o);
    handle(b.body, b.chat, demo(), o);
    ASSERT_EQ(o.accepted, 2) << "the base body must be accepted: " << b.body << "\n" << o.last_error;
  }
  std::mt19937_64 rng(20261204);
  Outcome out;
  const int n = cases(20000);
  for (int i = 0; i < n; ++i) {
    const Base& b = bases()[static_cast<size_t>(i) % bases().size()];
    std::string mutant = i % 2 == 0 ? mutate_structure(b.body, rng) : mutate_text(b.body, rng);
    if (i % 5 == 0) mutant = mutate_structure(mutate_structure(b.body, rng), rng);  // two changes
    const ModelContext& model = b.chat && i % 3 != 0 ? kwargs_model() : demo();
    handle(mutant, b.chat, model, out);
    // Through the other endpoint too, now and then: a chat body at /v1/completions and back.
    if (i % 7 == 0) {
      Outcome other;
      handle(mutant, !b.chat, model, other);
    }
  }
  std::cout << "[ mutation ] " << n << " request bodies: " << out.json_errors << " JSON errors, "
            << out.parse_errors << " field errors, " << out.input_errors << " model-check errors, "
            << out.accepted << " accepted\n";
  EXPECT_EQ(out.json_errors + out.parse_errors + out.input_errors + out.accepted, n);
  EXPECT_GT(out.json_errors, n / 10) << "the text mutations must reach the JSON parser's checks";
  EXPECT_GT(out.parse_errors, n / 5) << "the mutations must reach the field checks";
  EXPECT_GT(out.input_errors, n / 100) << "the mutations must reach the model-dependent checks";
  EXPECT_GT(out.accepted, n / 10);
}

// A max_tokens near 2^63 once overflowed the context check's sum (UBSan: signed integer
// overflow in build_engine_inputs; in release builds the sum wrapped negative and passed).
TEST(RequestMutation, HugeMaxTokensIsRefusedWithoutOverflow) {
  for (const auto& [chat, body] :
       std::vector<std::pair<bool, std::string>>{
           {false, R"({"model": "demo", "prompt": "Hello there", "max_tokens": 9223372036854775807})"},
           {true, R"({"model": "demo", "messages": [{"role": "user", "content": "Hi"}],
                      "max_completion_tokens": 9223372036854775807})"}}) {
    GenerationRequest request;
    ASSERT_FALSE(chat ? parse_chat_request(json::parse(body), {}, &request)
                      : parse_completion_request(json::parse(body), {}, &request));
    EngineInputs in;
    auto e = build_engine_inputs(request, demo(), &in);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->status, 400);
  }
}

}  // namespace
}  // namespace rlt::server
