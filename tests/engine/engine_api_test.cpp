// The engine API: validation, seeded determinism across batch compositions, abort, metrics.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>

#include "common/log.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"
#include "tokenizer/tokenizer.h"

namespace rlt {
namespace {

const std::string& demo_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("rlt_engine_api_test_" + std::to_string(::getpid()));
    if (!model::write_demo_checkpoint(d.string()).ok()) throw std::runtime_error("cannot write demo checkpoint");
    return d.string();
  }();
  return dir;
}

// The demo model on the exact CPU backend with an f32 cache of 256 blocks.
EngineConfig demo_config() {
  EngineConfig c;
  c.model = demo_dir();
  c.kv_dtype = KVDType::kF32;
  c.attention_backend = "cpu_reference";
  c.num_kv_blocks = 256;
  return c;
}

std::unique_ptr<Engine> make_engine(const std::string& backend = "cpu_reference", int chunk = 128) {
  set_log_level(LogLevel::kWarn);
  EngineConfig c = demo_config();
  c.attention_backend = backend;
  c.prefill_chunk_size = chunk;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(e).value();
}

// Steps until the engine drained; the whole output of every request that finished (`gathered`:
// what earlier steps already reported).
std::map<uint64_t, RequestResult> drain(Engine& e,
                                        std::map<uint64_t, RequestResult> gathered = {}) {
  std::map<uint64_t, RequestResult> finals;
  for (int i = 0; i < 10000 && e.has_unfinished(); ++i) {
    auto outs = e.step();
    EXPECT_TRUE(outs.ok()) << outs.status().to_string();
    if (!outs.ok()) break;
    for (auto& o : *outs) {
      gathered[o.request_id].append(o);
      if (o.finished) {
        EXPECT_FALSE(finals.count(o.request_id)) << "a second final output for " << o.request_id;
        finals[o.request_id] = std::move(gathered[o.request_id]);
        gathered.erase(o.request_id);
      }
    }
  }
  return finals;
}

SamplingParams sampled(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  p.top_k = 50;
  p.seed = seed;
  p.max_tokens = 10;
  p.ignore_eos = true;
  p.exit_threshold = 0.7;
  p.min_loops = 1;
  return p;
}

TEST(EngineApi, SeededRequestIsIdenticalAloneOrInAnyBatch) {
  for (const char* backend : {"cpu_reference", "cpu_flash"}) {
    SCOPED_TRACE(backend);
    const std::vector<int32_t> prompt = {20, 30, 40, 50, 60, 70, 80};
    auto alone = make_engine(backend);
    ASSERT_TRUE(alone->add_request(1, prompt, sampled(7)).ok());
    const RequestResult solo = drain(*alone)[1];
    ASSERT_EQ(solo.token_ids.size(), 10u);
    for (int chunk : {1, 4, 128}) {
      auto busy = make_engine(backend, chunk);
      for (uint64_t other = 10; other < 15; ++other) {
        std::vector<int32_t> p(other, static_cast<int32_t>(other));
        ASSERT_TRUE(busy->add_request(other, p, sampled(other)).ok());
      }
      ASSERT_TRUE(busy->add_request(1, prompt, sampled(7)).ok());
      ASSERT_TRUE(busy->add_request(20, {1, 2, 3}, sampled(99)).ok());
      auto finals = drain(*busy);
      EXPECT_EQ(finals[1].token_ids, solo.token_ids) << "chunk " << chunk;
      EXPECT_EQ(finals[1].exit_depths, solo.exit_depths) << "chunk " << chunk;
    }
  }
}

// n > 1 choices of one prompt (or any concurrent identical prompts): with prefix caching the
// first computes the shared pages while the others wait, then read them from the cache; each
// choice still gets exactly what it gets alone.
// Deferred packing (the default for bf16 checkpoints): the engine computes from the checkpoint's
// rows, packs between batches, and its outputs are those of an engine that packed at load, token
// for token and exit for exit, synchronous or asynchronous; idle work finishes the packing.
TEST(EngineApi, DeferredPackingGivesThePackedEnginesOutputs) {
  set_log_level(LogLevel::kWarn);
  auto run = [](bool defer, bool async, bool idle_first) {
    EngineConfig c = demo_config();
    c.defer_packing = defer;
    c.async_scheduling = async;
    if (async) c.exit_policy = ExitPolicy::kOuroDelayed;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ((*e)->has_idle_work(), defer);
    if (idle_first) {
      (*e)->do_idle_work();  // one step of packing: the lm head
      EXPECT_TRUE((*e)->has_idle_work());
    }
    for (uint64_t id = 0; id < 4; ++id) {
      std::vector<int32_t> prompt;
      for (int i = 0; i < 5 + 7 * static_cast<int>(id); ++i) prompt.push_back((i * 13 + static_cast<int>(id)) % 200 + 3);
      EXPECT_TRUE((*e)->add_request(id, prompt, sampled(100 + id)).ok());
    }
    auto finals = drain(**e);
    for (int i = 0; i < 100 && (*e)->has_idle_work(); ++i) (*e)->do_idle_work();
    EXPECT_FALSE((*e)->has_idle_work());
    return finals;
  };
  for (bool async : {false, true}) {
    const auto packed = run(false, async, false);
    ASSERT_EQ(packed.size(), 4u);
    for (bool idle_first : {false, true}) {
      const auto deferred = run(true, async, idle_first);
      ASSERT_EQ(deferred.size(), packed.size());
      for (const auto& [id, r] : packed) {
        EXPECT_EQ(deferred.at(id).token_ids, r.token_ids) << "request " << id << " async " << async;
        EXPECT_EQ(deferred.at(id).exit_depths, r.exit_depths) << "request " << id;
      }
    }
  }
}

TEST(EngineApi, ConcurrentIdenticalPromptsComputeTheirPagesOnce) {
  set_log_level(LogLevel::kWarn);
  EngineConfig c = demo_config();
  c.block_size = 4;
  c.prefill_chunk_size = 8;
  c.enable_prefix_caching = true;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(3 + (i * 7) % 250);
  auto shared = Engine::create(c);
  ASSERT_TRUE(shared.ok()) << shared.status().to_string();
  for (uint64_t choice = 0; choice < 4; ++choice)
    ASSERT_TRUE((*shared)->add_request(choice, prompt, sampled(100 + choice)).ok());
  auto finals = drain(**shared);
  // 36 cacheable tokens (the last one is always computed): 9 pages, read by three choices.
  EXPECT_GE((*shared)->metrics().prefix_hits, 3 * 9);
  for (uint64_t choice = 0; choice < 4; ++choice) {
    auto alone = make_engine();
    ASSERT_TRUE(alone->add_request(choice, prompt, sampled(100 + choice)).ok());
    EXPECT_EQ(finals[choice].token_ids, drain(*alone)[choice].token_ids) << "choice " << choice;
  }
  EXPECT_NE(finals[0].token_ids, finals[1].token_ids) << "different seeds, different choices";
}

TEST(EngineApi, RefusesBadRequestsAndStaysUsable) {
  auto e = make_engine();
  SamplingParams ok;
  ok.max_tokens = 4;
  struct Case {
    std::vector<int32_t> prompt;
    SamplingParams params;
    const char* needle;
  };
  SamplingParams too_deep = ok;
  too_deep.max_loops = 5;
  SamplingParams inverted = ok;
  inverted.min_loops = 4;
  inverted.max_loops = 2;
  SamplingParams long_out = ok;
  long_out.max_tokens = 5000;
  SamplingParams bad_temp = ok;
  bad_temp.temperature = -1;
  SamplingParams huge = ok;
  huge.max_tokens = 2000;
  const Case cases[] = {
      {{}, ok, "empty"},
      {{1, 259}, ok, "token id 259 is outside the vocabulary"},
      {{1}, too_deep, "max_loops must be in [1, 4]"},
      {{1}, inverted, "min_loops"},
      {{1}, long_out, "max_position_embeddings (4096)"},
      {{1}, bad_temp, "temperature"},
      {{1, 2, 3}, huge, "KV blocks over its life"},
  };
  for (const Case& c : cases) {
    Status s = e->add_request(5, c.prompt, c.params);
    EXPECT_FALSE(s.ok()) << c.needle;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << s.message();
    EXPECT_FALSE(e->has_unfinished()) << "a refused request leaves nothing behind";
  }
  ASSERT_TRUE(e->add_request(5, {1, 2}, ok).ok());
  EXPECT_EQ(e->add_request(5, {1, 2}, ok).code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(drain(*e)[5].token_ids.size() > 0, true);
  EXPECT_TRUE(e->add_request(5, {1, 2}, ok).ok()) << "an id is reusable after its final output";
}

TEST(EngineApi, AbortProducesExactlyOneFinalOutputAndFreesPages) {
  auto e = make_engine();
  SamplingParams p;
  p.max_tokens = 50;
  p.ignore_eos = true;
  ASSERT_TRUE(e->add_request(1, {5, 6, 7}, p).ok());
  ASSERT_TRUE(e->add_request(2, {8, 9}, p).ok());
  std::map<uint64_t, RequestResult> early;
  for (int i = 0; i < 8; ++i) {
    auto outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (const auto& o : *outs) early[o.request_id].append(o);
  }
  ASSERT_TRUE(e->abort(1).ok());
  EXPECT_EQ(e->abort(1).code(), ErrorCode::kNotFound);
  auto finals = drain(*e, early);
  EXPECT_EQ(finals[1].finish_reason, "abort");
  EXPECT_EQ(finals[1].error, "") << "a caller's abort is not an engine failure";
  EXPECT_EQ(finals[2].finish_reason, "length");
  EXPECT_EQ(finals[2].token_ids.size(), 50u);
  const EngineMetrics m = e->metrics();
  EXPECT_EQ(m.kv_used_blocks, 0);
  EXPECT_EQ(m.running, 0);
  EXPECT_GT(m.generated_tokens, 50);
  EXPECT_GE(m.mean_loops_per_token, 1.0);
  EXPECT_LE(m.mean_loops_per_token, 4.0);
}

TEST(EngineApi, ReportsTheAttentionSelection) {
  auto e = make_engine("auto");
  EXPECT_EQ(e->attention_backend(), "cpu_flash");
  EXPECT_NE(e->attention_info().find("\"selected\": \"cpu_flash\""), std::string::npos) << e->attention_info();
  EngineConfig c;
  c.model = demo_dir();
  c.attention_backend = "cuda_paged";
  auto refused = Engine::create(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no fallback"), std::string::npos);
  // Configuration names are parsed once, at the boundary, with the accepted names in the error.
  EXPECT_EQ(parse_kv_layout("diagonal").status().message(),
            "unknown kv layout 'diagonal' (accepted: last_exited, shared)");
  EXPECT_EQ(*parse_exit_policy(name(ExitPolicy::kOuroDelayed)), ExitPolicy::kOuroDelayed);
}

TEST(EngineApi, DeviceChoiceIsCheckedBeforeTheModelIsRead) {
  EngineConfig c;
  c.model = demo_dir();
  c.device = "tpu";
  auto bad = Engine::create(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected cpu, cuda or cuda:N"), std::string::npos) << bad.status().message();
  c.device = "cuda:7";
  auto cuda = Engine::create(c);
  if (!cuda.ok()) {
    // Without CUDA in the build, or without a 8th device, the message says which and what to do.
    EXPECT_NE(cuda.status().message().find("--device cuda:7"), std::string::npos) << cuda.status().message();
  }
  c.device = "cpu";
  EXPECT_TRUE(Engine::create(c).ok());
  c.programmatic_launch = true;  // a GPU-only setting asked of a CPU run
  auto pdl = Engine::create(c);
  ASSERT_FALSE(pdl.ok());
  EXPECT_NE(pdl.status().message().find("use --device cuda or drop --pdl"), std::string::npos)
      << pdl.status().message();
}

TEST(EngineApi, StreamsTextThatJoinsToTheFullDecode) {
  auto e = make_engine();
  SamplingParams p = sampled(11);
  p.max_tokens = 40;
  ASSERT_TRUE(e->add_request(1, {60, 61, 62}, p).ok());
  std::string streamed, pieces;
  RequestResult last;
  for (int i = 0; i < 2000 && e->has_unfinished(); ++i) {
    auto outs = e->step();
    ASSERT_TRUE(outs.ok());
    for (auto& o : *outs) {
      streamed += o.new_text;
      ASSERT_EQ(o.new_token_texts.size(), o.new_token_ids.size()) << "one text per token";
      for (const std::string& t : o.new_token_texts) pieces += t;
      pieces += o.final_text;
      EXPECT_EQ(o.num_tokens, static_cast<int64_t>(last.token_ids.size() + o.new_token_ids.size()));
      last.append(o);
    }
  }
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(pieces, streamed) << "the token texts and the final text make up the step texts";
  auto tokenizer = tok::Tokenizer::from_file(demo_dir() + "/tokenizer.json");
  ASSERT_TRUE(tokenizer.ok());
  const std::string full = *(*tokenizer)->decode(last.token_ids, /*skip_special_tokens=*/true);
  EXPECT_EQ(last.text, full);
  EXPECT_EQ(streamed, full) << "the deltas join to the full decode";
}

TEST(EngineApi, LogprobsComeWithEveryToken) {
  auto e = make_engine();
  SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = 4;
  p.ignore_eos = true;
  p.logprobs = 3;
  ASSERT_TRUE(e->add_request(1, {5, 6}, p).ok());
  const RequestResult o = drain(*e)[1];
  ASSERT_EQ(o.logprobs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(o.logprobs[i].token, o.token_ids[i]);
    ASSERT_EQ(o.logprobs[i].top.size(), 3u);
    EXPECT_EQ(o.logprobs[i].top[0].token, o.token_ids[i]) << "greedy picks the most likely token";
    EXPECT_LE(o.logprobs[i].logprob, 0.0f);
  }
}

// Speculative decoding per request: the combinations verification cannot do exactly are refused
// with the reason; a constrained request, one with logprobs and a plain one in the same engine
// give what plain decoding gives.
TEST(EngineApi, SpeculationIsRefusedWhereItCannotBeExact) {
  auto e = make_engine();
  SamplingParams base;
  base.max_tokens = 4;
  auto with = [&](SpeculativeMethod m, int k, int d) {
    SamplingParams p = base;
    p.speculative = SpeculativeParams{m, k, d};
    return p;
  };
  SamplingParams adaptive_exit = with(SpeculativeMethod::kNgram, 2, 0);
  adaptive_exit.exit_threshold = 0.7;
  SamplingParams shallow = with(SpeculativeMethod::kSelf, 2, 1);
  shallow.max_loops = 3;
  const std::pair<SamplingParams, const char*> cases[] = {
      {adaptive_exit, "exit_threshold 0.7 < 1 is not supported"},
      {shallow, "max_loops 3 would stop tokens earlier"},
      {with(SpeculativeMethod::kSelf, 2, 4), "draft_loops must be in [1, 3]"},
  };
  for (const auto& [params, needle] : cases) {
    const Status s = e->add_request(1, {60, 61}, params);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    EXPECT_FALSE(e->has_unfinished());
  }
  SamplingParams bad_k = with(SpeculativeMethod::kNgram, 33, 0);
  EXPECT_NE(e->add_request(1, {60}, bad_k).message().find("speculative.num_tokens"), std::string::npos);

  EngineConfig c;
  c.model = demo_dir();
  c.kv_layout = KVLayout::kShared;
  c.num_kv_blocks = 64;
  auto shared = Engine::create(c);
  ASSERT_TRUE(shared.ok());
  const Status s = (*shared)->add_request(1, {60}, with(SpeculativeMethod::kNgram, 2, 0));
  EXPECT_NE(s.message().find("--kv-layout last_exited"), std::string::npos) << s.message();
  c.kv_layout = KVLayout::kLastExited;
  c.speculative.num_tokens = 0;
  EXPECT_NE(Engine::create(c).status().message().find("--num-speculative-tokens must be in [1, 32]"),
            std::string::npos);
}

// A verification row that cannot be applied ends its request after the tokens before it, as
// plain decoding would have emitted them: with forced acceptance (benchmarks only) drafts from
// the prompt are forced past a constraint that forbids them.
TEST(EngineApi, AFailingVerificationRowKeepsTheTokensBeforeIt) {
  set_log_level(LogLevel::kError);
  EngineConfig c = demo_config();
  c.speculative.method = SpeculativeMethod::kNgram;
  c.speculative.ngram_min = 1;
  c.speculative.forced_acceptance = 1.0;
  c.speculative.adaptive = false;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto prompt = (*e)->tokenizer()->encode("qbaabxqbaabx", /*add_special_tokens=*/false);
  ASSERT_TRUE(prompt.ok());
  SamplingParams p;
  p.max_tokens = 12;
  p.logprobs = 0;
  p.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kRegex, "[ab]{10}", {}};
  ASSERT_TRUE((*e)->add_request(1, *prompt, p).ok());
  auto out = drain(**e);
  ASSERT_EQ(out.size(), 1u);
  const RequestResult& r = out[1];
  EXPECT_EQ(r.finish_reason, "abort");
  EXPECT_NE(r.error.find("broke the structured-output constraint"), std::string::npos) << r.error;
  EXPECT_GE(r.token_ids.size(), 1u);
  EXPECT_EQ(r.logprobs.size(), r.token_ids.size());
  EXPECT_TRUE(std::regex_match(r.text, std::regex("[ab]*"))) << r.text;
  EXPECT_EQ((*e)->metrics().kv_used_blocks, 0);
}

TEST(EngineApi, SpeculativeRequestsGivePlainDecodingsOutput) {
  using Kind = StructuredOutputs::Kind;
  std::vector<std::pair<std::vector<int32_t>, SamplingParams>> requests;
  SamplingParams greedy;
  greedy.max_tokens = 12;
  greedy.ignore_eos = true;
  greedy.logprobs = 2;
  requests.push_back({{60, 61, 62, 60, 61, 62, 60, 61}, greedy});
  SamplingParams seeded = sampled(9);
  seeded.exit_threshold = 1.0;
  requests.push_back({{70, 71, 70, 71}, seeded});
  SamplingParams constrained = greedy;
  constrained.structured_outputs = StructuredOutputs{Kind::kRegex, "(ab|ba){2,6}", {}};
  constrained.ignore_eos = false;
  requests.push_back({{60, 61}, constrained});
  auto run = [&](std::optional<SpeculativeParams> spec) {
    EngineConfig c = demo_config();
    c.speculative.adaptive = false;  // drafts whenever there are some, whatever the timings
    auto created = Engine::create(c);
    EXPECT_TRUE(created.ok()) << created.status().to_string();
    auto e = std::move(created).value();
    for (size_t i = 0; i < requests.size(); ++i) {
      SamplingParams p = requests[i].second;
      p.speculative = spec;
      EXPECT_TRUE(e->add_request(i, requests[i].first, p).ok());
    }
    auto out = drain(*e);
    return std::make_pair(out, e->metrics());
  };
  const auto [plain, plain_metrics] = run(std::nullopt);
  for (const SpeculativeParams& spec : {SpeculativeParams{SpeculativeMethod::kNgram, 4, 0},
                                        SpeculativeParams{SpeculativeMethod::kSelf, 3, 1}}) {
    SCOPED_TRACE(name(*spec.method));
    const auto [out, metrics] = run(spec);
    ASSERT_EQ(out.size(), plain.size());
    for (const auto& [id, p] : plain) {
      EXPECT_EQ(out.at(id).token_ids, p.token_ids) << id;
      EXPECT_EQ(out.at(id).exit_depths, p.exit_depths) << id;
      EXPECT_EQ(out.at(id).text, p.text) << id;
      ASSERT_EQ(out.at(id).logprobs.size(), p.logprobs.size()) << id;
      for (size_t j = 0; j < p.logprobs.size(); ++j) EXPECT_EQ(out.at(id).logprobs[j].logprob, p.logprobs[j].logprob);
    }
    EXPECT_GT(metrics.spec_verifications, 0);
    EXPECT_GT(metrics.spec_draft_tokens, 0);
    EXPECT_GE(metrics.spec_mean_accepted_length(), 1.0);
    EXPECT_EQ(metrics.generated_tokens, plain_metrics.generated_tokens);
  }
}

}  // namespace
}  // namespace rlt

namespace rlt {
namespace {

TEST(EngineApi, StructuredOutputsHoldForEveryRowOfAMixedBatch) {
  auto e = make_engine();
  auto constrained = [](uint64_t seed, StructuredOutputs::Kind kind, std::string spec,
                        std::vector<std::string> choices = {}) {
    SamplingParams p = sampled(seed);
    p.ignore_eos = false;
    p.max_tokens = 80;
    p.structured_outputs = StructuredOutputs{kind, std::move(spec), std::move(choices)};
    return p;
  };
  using Kind = StructuredOutputs::Kind;
  ASSERT_TRUE(e->add_request(1, {60, 61}, constrained(1, Kind::kRegex, "[a-c]{3,5}x")).ok());
  ASSERT_TRUE(e->add_request(2, {60, 62}, constrained(2, Kind::kChoice, "", {"alpha", "beta"})).ok());
  ASSERT_TRUE(e->add_request(3, {61, 62}, constrained(3, Kind::kJsonSchema,
      R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":12},
          "tag":{"enum":["x","yy"]}},"required":["n","tag"]})")).ok());
  ASSERT_TRUE(e->add_request(4, {60, 61, 62}, sampled(4)).ok());  // unconstrained, same batch
  auto out = drain(*e);
  ASSERT_EQ(out.size(), 4u);
  for (uint64_t id : {1, 2, 3}) EXPECT_EQ(out[id].finish_reason, "stop") << id << ": " << out[id].text;
  EXPECT_TRUE(std::regex_match(out[1].text, std::regex("[a-c]{3,5}x"))) << out[1].text;
  EXPECT_TRUE(out[2].text == "alpha" || out[2].text == "beta") << out[2].text;
  EXPECT_TRUE(std::regex_match(out[3].text, std::regex(
      R"re(\{\s*"n"\s*:\s*([1-9]|1[0-2])\s*,\s*"tag"\s*:\s*"(x|yy)"\s*\})re"))) << out[3].text;
  EXPECT_GT(e->metrics().constrained_tokens, 0);

  // The unconstrained row is what it is alone: masks are per row.
  auto alone = make_engine();
  ASSERT_TRUE(alone->add_request(4, {60, 61, 62}, sampled(4)).ok());
  EXPECT_EQ(drain(*alone)[4].token_ids, out[4].token_ids);
}

TEST(EngineApi, BadConstraintsAreRefusedAtAdmission) {
  auto e = make_engine();
  SamplingParams p;
  p.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kJsonSchema, R"({"type":"string","format":"hostname"})", {}};
  Status s = e->add_request(1, {60}, p);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hostname"), std::string::npos) << s.message();
  EXPECT_FALSE(e->prepare_structured_outputs(StructuredOutputs{StructuredOutputs::Kind::kRegex, "(a", {}}).ok());
  EXPECT_TRUE(e->prepare_structured_outputs(StructuredOutputs{StructuredOutputs::Kind::kRegex, "a+", {}}).ok());
  EXPECT_FALSE(e->has_unfinished());
  ASSERT_TRUE(e->add_request(2, {60}, sampled(2)).ok());
  EXPECT_EQ(drain(*e).size(), 1u);
}

}  // namespace
}  // namespace rlt
