// Request bodies: accepted forms, refused values, and errors that name the field.
#include "server/request_parser.h"

#include <gtest/gtest.h>

namespace rlt::server {
namespace {

std::optional<ApiError> completion(const std::string& body, GenerationRequest* out = nullptr) {
  GenerationRequest g;
  auto e = parse_completion_request(json::parse(body), ParseLimits{}, out ? out : &g);
  return e;
}

std::optional<ApiError> chat(const std::string& body, GenerationRequest* out = nullptr) {
  GenerationRequest g;
  return parse_chat_request(json::parse(body), ParseLimits{}, out ? out : &g);
}

void expect_400(const std::optional<ApiError>& e, const std::string& param,
                const std::string& fragment) {
  ASSERT_TRUE(e.has_value()) << "expected an error mentioning " << fragment;
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->param, param);
  EXPECT_NE(e->message.find(fragment), std::string::npos) << e->message;
}

TEST(CompletionRequest, DefaultsFollowOpenAI) {
  GenerationRequest g;
  ASSERT_FALSE(completion(R"({"model": "m", "prompt": "hi"})", &g));
  EXPECT_EQ(g.model, "m");
  ASSERT_EQ(g.prompts.size(), 1u);
  EXPECT_EQ(g.prompts[0].text, "hi");
  EXPECT_EQ(g.params.max_tokens, 16);
  EXPECT_EQ(g.params.temperature, 1.0);
  EXPECT_FALSE(g.stream);
  EXPECT_FALSE(g.logprobs);
}

TEST(CompletionRequest, EveryFieldIsRead) {
  GenerationRequest g;
  ASSERT_FALSE(completion(
      R"({"model": "m", "prompt": [1, 2], "max_tokens": 5, "temperature": 0, "top_p": 0.5,
      "top_k": 3, "min_p": 0.1, "seed": 7, "stop": ["a", "b"], "n": 1, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "repetition_penalty": 1.1, "stream": true, "stream_options": {"include_usage": true},
      "user": "u", "logprobs": 2, "echo": false, "best_of": 1, "suffix": null, "logit_bias": {}, "min_loops": 1,
      "max_loops": 3, "exit_threshold": 0.5, "priority": -2, "ignore_eos": true, "stop_token_ids": [9],
      "exit_criterion": "kl", "exit_criterion_threshold": 0.001})",
      &g));
  EXPECT_FALSE(g.prompts[0].is_text);
  EXPECT_EQ(g.prompts[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(g.params.max_tokens, 5);
  EXPECT_EQ(g.params.temperature, 0.0);
  EXPECT_EQ(g.params.top_k, 3);
  EXPECT_EQ(*g.params.seed, 7u);
  EXPECT_EQ(g.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 2);
  EXPECT_EQ(g.params.min_loops, 1);
  EXPECT_EQ(g.params.max_loops, 3);
  EXPECT_EQ(g.params.exit_threshold, 0.5);
  EXPECT_EQ(g.params.exit_criterion, ExitCriterion::kKl);
  EXPECT_EQ(g.params.exit_criterion_threshold, 0.001);
  EXPECT_EQ(g.params.priority, -2);
  EXPECT_TRUE(g.params.ignore_eos);
  EXPECT_EQ(g.params.stop_token_ids, (std::vector<int32_t>{9}));
}

TEST(CompletionRequest, ExitCriterionNamesAreChecked) {
  expect_400(completion(R"({"model": "m", "prompt": "x", "exit_criterion": "entropy"})"), "exit_criterion",
             "unknown exit criterion");
  expect_400(completion(R"({"model": "m", "prompt": "x", "exit_criterion": 3})"), "exit_criterion", "must be a string");
  expect_400(completion(R"({"model": "m", "prompt": "x", "exit_criterion_threshold": "a"})"),
             "exit_criterion_threshold", "must be a number");
  GenerationRequest g;
  ASSERT_FALSE(completion(R"({"model": "m", "prompt": "x", "exit_criterion": null})", &g));
  EXPECT_EQ(g.params.exit_criterion, ExitCriterion::kGate);
  EXPECT_FALSE(g.params.exit_criterion_threshold);
}

TEST(CompletionRequest, PromptForms) {
  GenerationRequest g;
  ASSERT_FALSE(completion(R"({"model": "m", "prompt": ["a", "b", [3, 4]]})", &g));
  ASSERT_EQ(g.prompts.size(), 3u);
  EXPECT_EQ(g.prompts[1].text, "b");
  EXPECT_EQ(g.prompts[2].ids, (std::vector<int32_t>{3, 4}));
  expect_400(completion(R"({"model": "m", "prompt": []})"), "prompt", "must be");
  expect_400(completion(R"({"model": "m", "prompt": 5})"), "prompt", "must be");
  expect_400(completion(R"({"model": "m", "prompt": [1, -2]})"), "prompt", "token ids");
  expect_400(completion(R"({"model": "m", "prompt": [1.5]})"), "prompt", "token ids");
  expect_400(completion(R"({"model": "m", "prompt": ["a", true]})"), "prompt", "boolean");
  expect_400(completion(R"({"model": "m"})"), "prompt", "required");
}

TEST(CompletionRequest, UnknownFieldsAreNamed) {
  auto e = completion(R"({"model": "m", "prompt": "x", "foo": 1, "tools": []})");
  expect_400(e, "foo", "'foo', 'tools'");
}

TEST(CompletionRequest, WrongTypesAndValuesAreRefused) {
  expect_400(completion(R"({"model": "m", "prompt": "x", "n": 0})"), "n", "[1, 128]");
  expect_400(completion(R"({"model": "m", "prompt": ["a", "b"], "n": 65})"), "n", "128 choices");
  expect_400(completion(R"({"model": "m", "prompt": "x", "stream": 1})"), "stream",
             "true or false");
  expect_400(completion(R"({"model": "m", "prompt": "x", "max_tokens": 0})"), "max_tokens", "only with 'echo'");
  expect_400(completion(R"({"model": "m", "prompt": "x", "max_tokens": -1})"), "max_tokens", "[0,");
  expect_400(completion(R"({"model": "m", "prompt": "x", "max_tokens": true})"), "max_tokens",
             "integer");
  expect_400(completion(R"({"model": "m", "prompt": "x", "max_tokens": 2.5})"), "max_tokens",
             "integer");
  expect_400(completion(R"({"model": "m", "prompt": "x", "max_tokens": 18446744073709551615})"),
             "max_tokens", "[0,");
  expect_400(completion(R"({"model": "m", "prompt": "x", "temperature": "0"})"), "temperature",
             "number");
  expect_400(completion(R"({"model": "m", "prompt": "x", "seed": -1})"), "seed", "[0,");
  expect_400(completion(R"({"model": "m", "prompt": "x", "stop": "x", "stop_token_ids": "y"})"),
             "stop_token_ids", "token ids");
  expect_400(completion(R"({"model": "m", "prompt": "x", "stop": ""})"), "stop", "empty");
  expect_400(completion(R"({"model": "m", "prompt": "x", "stop": [1]})"), "stop", "strings");
  expect_400(completion(R"({"model": "m", "prompt": "x", "logprobs": 21})"), "logprobs", "[0, 20]");
  expect_400(completion(R"({"model": "m", "prompt": "x", "logprobs": true})"), "logprobs",
             "integer");
  expect_400(completion(R"({"model": "m", "prompt": "x", "echo": 1})"), "echo", "true or false");
  expect_400(completion(R"({"model": "m", "prompt": "x", "prompt_logprobs": 21})"), "prompt_logprobs",
             "[0, 20]");
  expect_400(completion(R"({"model": "m", "prompt": "x", "n": 3, "best_of": 2})"), "best_of", "at least 'n'");
  expect_400(completion(R"({"model": "m", "prompt": "x", "best_of": 2, "stream": true})"), "best_of", "streamed");
  GenerationRequest g;
  ASSERT_FALSE(completion(R"({"model": "m", "prompt": "x", "n": 2, "best_of": 5})", &g));
  EXPECT_EQ(g.n, 2);
  EXPECT_EQ(g.copies(), 5);
  expect_400(completion(R"({"model": "m", "prompt": "x", "logit_bias": [1, 5]})"), "logit_bias",
             "object");
  expect_400(completion(R"({"model": "m", "prompt": "x", "logit_bias": {"a": 5}})"), "logit_bias",
             "token ids");
  expect_400(completion(R"({"model": "m", "prompt": "x", "logit_bias": {"-1": 5}})"), "logit_bias",
             "token ids");
  expect_400(completion(R"({"model": "m", "prompt": "x", "logit_bias": {"1": "5"}})"), "logit_bias",
             "numbers");
  expect_400(completion(R"({"model": 5, "prompt": "x"})"), "model", "non-empty string");
  expect_400(completion(R"({"model": "", "prompt": "x"})"), "model", "non-empty string");
  expect_400(completion(R"({"prompt": "x"})"), "model", "required");
  EXPECT_TRUE(completion(R"([1, 2])").has_value());
}

TEST(CompletionRequest, LogitBiasIsReadAsTokenIdsAndBiases) {
  GenerationRequest g;
  ASSERT_FALSE(
      completion(R"({"model": "m", "prompt": "x", "logit_bias": {"7": 100, "3": -2.5}})", &g));
  ASSERT_EQ(g.params.logit_bias.size(), 2u);
  EXPECT_EQ(g.params.logit_bias[0], (std::pair<int32_t, float>{7, 100.0f}));
  EXPECT_EQ(g.params.logit_bias[1], (std::pair<int32_t, float>{3, -2.5f}));
}

TEST(CompletionRequest, StreamOptionsNeedStreamAndOnlyIncludeUsage) {
  expect_400(
      completion(R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": true}})"),
      "stream_options", "stream");
  expect_400(
      completion(R"({"model": "m", "prompt": "x", "stream": true, "stream_options": {"x": 1}})"),
      "stream_options", "'x'");
  expect_400(
      completion(
          R"({"model": "m", "prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})"),
      "stream_options", "true or false");
  GenerationRequest g;
  ASSERT_FALSE(
      completion(R"({"model": "m", "prompt": "x", "stream": true, "stream_options": null})", &g));
  EXPECT_FALSE(g.include_usage);
}

TEST(CompletionRequest, NullMeansDefault) {
  GenerationRequest g;
  ASSERT_FALSE(completion(
      R"({"model": "m", "prompt": "x", "max_tokens": null, "temperature": null, "seed": null,
                              "stop": null, "n": null, "logprobs": null})",
      &g));
  EXPECT_EQ(g.params.max_tokens, 16);
  EXPECT_FALSE(g.params.seed.has_value());
  EXPECT_FALSE(g.logprobs);
}

TEST(ChatRequest, MessagesAreValidatedAndNormalized) {
  GenerationRequest g;
  ASSERT_FALSE(chat(R"({"model": "m", "messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "n"}]})",
                    &g));
  ASSERT_EQ(g.messages.size(), 2u);
  EXPECT_EQ(g.messages[1]["content"], "ab");
  EXPECT_EQ(g.messages[1]["name"], "n");
  EXPECT_FALSE(g.max_tokens_given);
  expect_400(chat(R"({"model": "m", "messages": []})"), "messages", "non-empty");
  expect_400(chat(R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})"), "messages",
             "role");
  expect_400(chat(R"({"model": "m", "messages": [{"role": "user"}]})"), "messages",
             "content is required");
  expect_400(chat(R"({"model": "m", "messages": [{"role": "user", "content": 3}]})"), "messages",
             "string");
  expect_400(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]})"),
      "messages", "tool_calls");
  expect_400(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
      "messages", "text parts");
}

TEST(ChatRequest, ChatFields) {
  GenerationRequest g;
  ASSERT_FALSE(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
      "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 2, "chat_template_kwargs": {"k": 1}})",
           &g));
  EXPECT_EQ(g.params.max_tokens, 7);
  EXPECT_TRUE(g.max_tokens_given);
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 2);
  EXPECT_EQ(g.template_kwargs["k"], 1);
  expect_400(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"),
      "top_logprobs", "logprobs");
  expect_400(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": 1})"),
      "logprobs", "true or false");
  expect_400(
      chat(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "prompt": "x"})"),
      "prompt", "unsupported");
}

}  // namespace
}  // namespace rlt::server

namespace rlt::server {
namespace {

TEST(SpeculativeField, IsReadWithEveryPartOptional) {
  GenerationRequest g;
  ASSERT_FALSE(chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],
                        "speculative":{"method":"ngram","num_tokens":3}})", &g));
  ASSERT_TRUE(g.params.speculative);
  EXPECT_EQ(g.params.speculative->method, SpeculativeMethod::kNgram);
  EXPECT_EQ(g.params.speculative->num_tokens, 3);
  EXPECT_EQ(g.params.speculative->draft_loops, 0);
  GenerationRequest k;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","speculative":{"num_tokens":2,"draft_loops":1}})", &k));
  EXPECT_FALSE(k.params.speculative->method) << "absent: the server's method";
  EXPECT_EQ(k.params.speculative->draft_loops, 1);
  GenerationRequest off;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","speculative":{"method":"off"}})", &off));
  EXPECT_EQ(off.params.speculative->method, SpeculativeMethod::kOff);
  GenerationRequest none;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","speculative":null})", &none));
  EXPECT_FALSE(none.params.speculative);
  expect_400(completion(R"({"model":"m","prompt":"x","speculative":{"method":"medusa"}})"), "speculative.method",
             "accepted: off, ngram, self");
  expect_400(completion(R"({"model":"m","prompt":"x","speculative":{"method":3}})"), "speculative.method",
             "must be a string");
  expect_400(completion(R"({"model":"m","prompt":"x","speculative":{"num_tokens":33}})"),
             "speculative.num_tokens", "[0, 32]");
  expect_400(completion(R"({"model":"m","prompt":"x","speculative":{"k":1}})"), "speculative.k", "'k'");
  expect_400(completion(R"({"model":"m","prompt":"x","speculative":"ngram"})"), "speculative", "must be an object");
}

TEST(StructuredOutputFields, EveryFormBecomesOneConstraint) {
  using Kind = StructuredOutputs::Kind;
  GenerationRequest g;
  ASSERT_FALSE(chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})", &g));
  ASSERT_TRUE(g.params.structured_outputs);
  EXPECT_EQ(g.params.structured_outputs->kind, Kind::kJsonObject);
  EXPECT_EQ(g.structured_param, "response_format");
  GenerationRequest s;
  ASSERT_FALSE(chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"integer"},"strict":true}}})", &s));
  EXPECT_EQ(s.params.structured_outputs->kind, Kind::kJsonSchema);
  EXPECT_EQ(s.params.structured_outputs->spec, R"({"type":"integer"})");
  GenerationRequest t;
  ASSERT_FALSE(chat(R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})", &t));
  EXPECT_FALSE(t.params.structured_outputs);
  GenerationRequest v;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","structured_outputs":{"choice":["a","b"]}})", &v));
  EXPECT_EQ(v.params.structured_outputs->kind, Kind::kChoice);
  EXPECT_EQ(v.params.structured_outputs->choices, (std::vector<std::string>{"a", "b"}));
  GenerationRequest r;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","guided_regex":"[0-9]+"})", &r));
  EXPECT_EQ(r.params.structured_outputs->kind, Kind::kRegex);
  EXPECT_EQ(r.structured_param, "guided_regex");
  GenerationRequest gr;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","structured_outputs":{"grammar":"root ::= \"a\""}})", &gr));
  EXPECT_EQ(gr.params.structured_outputs->kind, Kind::kGrammar);
  GenerationRequest js;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"x","guided_json":"{\"type\":\"string\"}"})", &js));
  EXPECT_EQ(js.params.structured_outputs->spec, R"({"type":"string"})");
}

TEST(StructuredOutputFields, MalformedOrConflictingConstraintsAreRefused) {
  const std::string head = R"({"model":"m","messages":[{"role":"user","content":"x"}],)";
  expect_400(chat(head + R"("response_format":{"type":"xml"}})"), "response_format", "\"xml\"");
  expect_400(chat(head + R"("response_format":"json"})"), "response_format", "must be an object");
  expect_400(chat(head + R"("response_format":{"type":"json_schema"}})"), "response_format", "needs \"json_schema\"");
  expect_400(chat(head + R"("response_format":{"type":"json_schema","json_schema":{"schema":5}}})"), "response_format",
             "must be a JSON schema");
  expect_400(chat(head + R"("structured_outputs":{"regex":"a","choice":["b"]}})"), "structured_outputs", "exactly one");
  expect_400(chat(head + R"("structured_outputs":{"regex":"a","whitespace_pattern":" "}})"), "structured_outputs",
             "whitespace_pattern");
  expect_400(chat(head + R"("guided_choice":[]})"), "guided_choice", "non-empty list");
  expect_400(chat(head + R"("guided_regex":""})"), "guided_regex", "non-empty string");
  expect_400(chat(head + R"("response_format":{"type":"json_object"},"guided_regex":"a"})"), "guided_regex",
             "both constrain");
}

}  // namespace
}  // namespace rlt::server
