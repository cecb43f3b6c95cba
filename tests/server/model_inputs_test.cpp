// The model context, prompt building and the choice decoder on the demo model's tokenizer
// (byte-level: ids 0-2 are <|endoftext|>, <|im_start|>, <|im_end|>; one id per byte after).
#include <gtest/gtest.h>

#include "demo_model.h"
#include "server/choice_decoder.h"
#include "server/model_context.h"
#include "server/prompt_builder.h"
#include "server/request_parser.h"
#include "tokenizer/decode_stream.h"

namespace rlt::server {
namespace {

const ModelContext& ctx() { return testing::demo_context(); }

std::vector<int32_t> encode(const std::string& text) { return *ctx().tokenizer->encode(text, false); }

GenerationRequest parse(const std::string& body, bool chat) {
  GenerationRequest g;
  auto e = chat ? parse_chat_request(json::parse(body), {}, &g) : parse_completion_request(json::parse(body), {}, &g);
  EXPECT_FALSE(e.has_value()) << e->message;
  return g;
}

TEST(ModelContext, DemoModelFacts) {
  const ModelContext& m = ctx();
  EXPECT_EQ(m.name, default_served_name(testing::demo_dir()));  // the folder name
  EXPECT_EQ(m.vocab_size, 259);
  EXPECT_EQ(m.total_loops, 4);
  EXPECT_TRUE(m.chat_template.has_value());
  EXPECT_EQ(m.end_of_turn_ids, (std::vector<int32_t>{2}));  // <|im_end|>, not the EOS (0)
  EXPECT_EQ(default_served_name("/a/b/ouro-1.4b/"), "ouro-1.4b");
}

TEST(PromptBuilder, CompletionPromptsAreTokenizedOrTakenAsIds) {
  EngineInputs in;
  ASSERT_FALSE(build_engine_inputs(parse(R"({"model": "m", "prompt": ["ab", [5, 6]]})", false), ctx(), &in));
  ASSERT_EQ(in.prompts.size(), 2u);
  EXPECT_EQ(in.prompts[0], encode("ab"));
  EXPECT_EQ(in.prompts[1], (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(in.params.stop_token_ids.empty());
}

TEST(PromptBuilder, ChatRendersTheTemplateAndStopsAtEndOfTurn) {
  EngineInputs in;
  ASSERT_FALSE(build_engine_inputs(
      parse(R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}], "logprobs": true})", true), ctx(), &in));
  ASSERT_EQ(in.prompts.size(), 1u);
  auto text = ctx().tokenizer->decode(in.prompts[0], false);
  EXPECT_NE(text->find("<|im_start|>user\nHi<|im_end|>"), std::string::npos) << *text;
  EXPECT_EQ(text->substr(text->size() - 22), "<|im_start|>assistant\n");
  EXPECT_EQ(in.params.stop_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(*in.params.logprobs, 0);
  // No max_tokens: up to the end of the context.
  EXPECT_EQ(in.params.max_tokens, 4096 - static_cast<int64_t>(in.prompts[0].size()) + 1);
}

TEST(PromptBuilder, ModelDependentChecksAreRefusedWith400) {
  auto refuse = [](const std::string& body, const std::string& fragment) {
    EngineInputs in;
    auto e = build_engine_inputs(parse(body, false), ctx(), &in);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->status, 400);
    EXPECT_NE(e->message.find(fragment), std::string::npos) << e->message;
  };
  refuse(R"({"model": "m", "prompt": ""})", "empty");
  refuse(R"({"model": "m", "prompt": [259]})", "outside the vocabulary");
  refuse(R"({"model": "m", "prompt": "x", "max_tokens": 5000})", "context");
  refuse(R"({"model": "m", "prompt": "x", "max_loops": 9})", "max_loops");
  refuse(R"({"model": "m", "prompt": "x", "temperature": -1})", "temperature");
  refuse(R"({"model": "m", "prompt": "x", "top_p": 0})", "top_p");
  refuse(R"({"model": "m", "prompt": "x", "presence_penalty": 3})", "presence_penalty");
}

// Batches as the engine's output processor sends them: each token's text from the request's one
// detokenizer, the held-back rest with the finishing batch.
struct EngineOutputs {
  tok::IncrementalDetokenizer detokenizer{ctx().tokenizer, /*skip_special_tokens=*/true};

  TokenBatch batch(std::vector<int32_t> tokens, bool finished = false, std::string reason = "") {
    TokenBatch b;
    b.exit_depths.assign(tokens.size(), 4);
    for (int32_t t : tokens) b.texts.push_back(detokenizer.push(t));
    b.tokens = std::move(tokens);
    b.finished = finished;
    if (finished) b.final_text = detokenizer.flush();
    b.finish_reason = std::move(reason);
    b.prompt_tokens = 3;
    return b;
  }
};

TEST(ChoiceDecoder, OnePiecePerTokenAndUtf8NeverSplit) {
  EngineOutputs engine;
  ChoiceDecoder d({});
  const auto ids = encode("aé");  // 'a', then two byte tokens for é
  ASSERT_EQ(ids.size(), 3u);
  auto pieces = d.consume(engine.batch({ids[0], ids[1]}));
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].text, "a");
  EXPECT_EQ(pieces[1].text, "");  // half a character is held back
  pieces = d.consume(engine.batch({ids[2]}, true, "length"));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].text, "é");
  EXPECT_TRUE(pieces[0].last);
  EXPECT_EQ(pieces[0].finish_reason, "length");
  EXPECT_EQ(d.text(), "aé");
  EXPECT_EQ(d.completion_tokens(), 3);
  EXPECT_EQ(d.text_offsets(), (std::vector<size_t>{0, 1, 1}));
}

TEST(ChoiceDecoder, SpecialTokensAreHidden) {
  EngineOutputs engine;
  ChoiceDecoder d({});
  auto ids = encode("ok");
  ids.push_back(2);  // <|im_end|>
  auto pieces = d.consume(engine.batch(ids, true, "stop"));
  EXPECT_EQ(d.text(), "ok");
  EXPECT_EQ(pieces.back().token, 2);
  EXPECT_EQ(pieces.back().text, "");
  EXPECT_EQ(d.finish_reason(), "stop");
  EXPECT_EQ(d.completion_tokens(), 3);
}

TEST(ChoiceDecoder, StopStringEndsTheChoiceAndDropsLaterTokens) {
  EngineOutputs engine;
  ChoiceDecoder d({"cd"});
  auto pieces = d.consume(engine.batch(encode("abcdef")));
  ASSERT_EQ(pieces.size(), 4u);  // a, b, c, d: the stop completes on 'd'
  EXPECT_TRUE(pieces.back().last);
  EXPECT_EQ(pieces.back().finish_reason, "stop");
  EXPECT_EQ(d.text(), "ab");
  EXPECT_TRUE(d.stopped_by_string());
  EXPECT_TRUE(d.consume(engine.batch(encode("gh"), true, "length")).empty());
  EXPECT_EQ(d.completion_tokens(), 4);
}

TEST(ChoiceDecoder, FinishWithoutATokenStillEndsTheChoice) {
  EngineOutputs engine;
  ChoiceDecoder d({"zz"});
  d.consume(engine.batch(encode("az")));
  EXPECT_EQ(d.text(), "a");  // "z" could start "zz"
  auto pieces = d.consume(engine.batch({}, true, "length"));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].token, -1);
  EXPECT_EQ(pieces[0].text, "z");
  EXPECT_EQ(d.text(), "az");
}

}  // namespace
}  // namespace rlt::server
