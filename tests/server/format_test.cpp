// Response shapes, SSE framing, error bodies and the Prometheus text.
#include <gtest/gtest.h>

#include "demo_model.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_format.h"

namespace rlt::server {
namespace {

const tok::Tokenizer& demo_tokenizer() {
  static const auto t = *tok::Tokenizer::from_file(testing::demo_dir() + "/tokenizer.json");
  return *t;
}

TEST(ApiError, BodyHasOpenAIShapeAndSurvivesInvalidUtf8) {
  ApiError e = invalid_request("bad \xff value", "temperature");
  const json body = json::parse(e.body());
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_EQ(body["error"]["code"], "invalid_request");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("bad"), std::string::npos);
  EXPECT_TRUE(json::parse(overloaded("x").body())["error"]["param"].is_null());
  EXPECT_EQ(overloaded("x").retry_after_s, 1);
  EXPECT_EQ(timeout_error("x").status, 504);
}

TEST(OpenAIFormat, IdsUsageAndSse) {
  EXPECT_EQ(make_response_id(Endpoint::kCompletions).rfind("cmpl-", 0), 0u);
  EXPECT_EQ(make_response_id(Endpoint::kChat).rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(make_response_id(Endpoint::kChat), make_response_id(Endpoint::kChat));
  EXPECT_EQ(usage_json(3, 4)["total_tokens"], 7);
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event(json{{"t", std::string("\xe2\x82")}}).find("\xe2\x82\""), std::string::npos);  // replaced
}

TEST(OpenAIFormat, ChunksCarryRoleFinishUsageAndExtensions) {
  ResponseMeta meta;
  meta.endpoint = Endpoint::kChat;
  meta.id = "chatcmpl-1";
  meta.created = 5;
  meta.model = "m";
  meta.include_usage = true;
  json role = chat_role_chunk(meta, 0);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(role["usage"].is_null());
  EXPECT_TRUE(role.contains("usage"));
  TokenPiece p;
  p.token = 68;  // 'A' in the demo's byte-level vocabulary (3 specials first)
  p.exit_depth = 3;
  p.text = "A";
  p.last = true;
  p.finish_reason = "length";
  json chunk = token_chunk(meta, 0, p, demo_tokenizer());
  EXPECT_EQ(chunk["choices"][0]["delta"]["content"], "A");
  EXPECT_EQ(chunk["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunk["choices"][0]["exit_depths"], json::array({3}));
  EXPECT_EQ(chunk["choices"][0]["token_ids"], json::array({68}));
  json usage = usage_chunk(meta, 2, 1);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 3);
  meta.endpoint = Endpoint::kCompletions;
  meta.include_usage = false;
  p.last = false;
  meta.logprobs = true;
  meta.top_logprobs = 1;
  p.logprobs = TokenLogprobs{68, -0.5f, {{69, -1.0f}}, 0};
  chunk = token_chunk(meta, 1, p, demo_tokenizer());
  EXPECT_EQ(chunk["object"], "text_completion");
  EXPECT_EQ(chunk["choices"][0]["text"], "A");
  EXPECT_EQ(chunk["choices"][0]["index"], 1);
  EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(chunk.contains("usage"));
  const json& lp = chunk["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"A"}));
  EXPECT_EQ(lp["token_logprobs"][0], -0.5);
  EXPECT_EQ(lp["top_logprobs"][0]["B"], -1.0);
}

// A chat choice's text with --reasoning-parser deepseek_r1: thinking to reasoning_content, the
// rest to content (null when empty), tool calls from the content only.
TEST(OpenAIFormat, ReasoningIsSplitOffBeforeToolCalls) {
  auto response = [](const std::string& text, bool tools, ReasoningFormat reasoning) {
    ResponseMeta meta;
    meta.endpoint = Endpoint::kChat;
    meta.tool_calls = tools;
    meta.reasoning = reasoning;
    std::vector<ChoiceDecoder> choices;
    choices.emplace_back(std::vector<std::string>{});
    TokenBatch b;
    b.tokens = {68};
    b.exit_depths = {4};
    b.texts = {text};
    b.finished = true;
    b.finish_reason = "stop";
    choices.back().consume(b);
    return final_response(meta, choices, demo_tokenizer())["choices"][0];
  };
  const auto r = ReasoningFormat::kDeepSeekR1;
  json c = response("Two and two.</think>\n\nFour.", false, r);
  EXPECT_EQ(c["message"]["reasoning_content"], "Two and two.");
  EXPECT_EQ(c["message"]["content"], "\n\nFour.");
  c = response("Still thinking", false, r);
  EXPECT_EQ(c["message"]["reasoning_content"], "Still thinking");
  EXPECT_TRUE(c["message"]["content"].is_null());
  c = response("Hmm</think><tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", true, r);
  EXPECT_EQ(c["message"]["reasoning_content"], "Hmm");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  c = response("Hmm, no call", true, r);
  EXPECT_TRUE(c["message"]["content"].is_null());
  c = response("a</think>b", false, ReasoningFormat::kNone);
  EXPECT_FALSE(c["message"].contains("reasoning_content"));
  EXPECT_EQ(c["message"]["content"], "a</think>b");
}

TEST(Metrics, PrometheusTextHasEveryFamily) {
  Metrics m;
  m.count_http("/v1/completions", 200);
  m.count_finished("chat", "stop", 5, 3);
  m.observe_ttft(0.02);
  m.observe_itl(0.003);
  m.observe_itl(100);
  EngineMetrics e;
  e.kv_used_blocks = 3;
  e.kv_total_blocks = 10;
  e.prefix_queries = 4;
  e.prefix_hits = 1;
  e.mean_loops_per_token = 3.5;
  e.device_sampled_batches = 7;
  e.device_time.recurrent = {1500.0, 12};
  m.set_engine(e, 2, 1);
  m.set_attention_backend("cpu_flash");
  m.set_state(true, false);
  const std::string text = m.render();
  for (const char* line :
       {"rlt_ready 1", "rlt_http_responses_total{route=\"/v1/completions\",code=\"200\"} 1",
        "rlt_requests_finished_total{endpoint=\"chat\",reason=\"stop\"} 1", "rlt_completion_tokens_total 3",
        "rlt_time_to_first_token_seconds_bucket{le=\"0.025\"} 1", "rlt_inter_token_latency_seconds_bucket{le=\"+Inf\"} 2",
        "rlt_inter_token_latency_seconds_bucket{le=\"0.005\"} 1", "rlt_inter_token_latency_seconds_count 2",
        "rlt_kv_cache_used_blocks 3", "rlt_requests_in_flight 2", "rlt_requests_submitted 1",
        "rlt_prefix_cache_hit_rate 0.25", "rlt_mean_loops_per_token 3.5", "rlt_attention_backend_info{backend=\"cpu_flash\"} 1",
        "rlt_device_sampled_batches_total 7", "rlt_device_seconds_total{stage=\"recurrent\"} 1.5",
        "rlt_device_seconds_total{stage=\"coda\"} 0"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace rlt::server
