// The batched engine against the dense reference model: randomized request mixes under every
// scheduling knob produce exactly the reference's tokens, exit depths and prompt logprobs.
//
// Exactness is expected, not approximate: with f32 K/V and the cpu_reference attention backend the
// engine computes every row with the reference model's arithmetic (batch-invariant linear
// kernels, the same dense attention over the same values), so tokens and depths must match bit
// for bit whatever the batch composition.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "common/log.h"
#include "kernels/cpu/linear_bf16.h"
#include "model/demo_checkpoint.h"
#include "model/reference_model.h"
#include "rlt/engine.h"
#include "sampling/logprobs.h"

namespace rlt {
namespace {

// A checkpoint under test and its loaded model (f32 activations, and bf16 where asked).
struct TestModel {
  std::string dir;
  std::shared_ptr<const model::OuroModel> f32;
  std::shared_ptr<const model::OuroModel> bf16;

  static TestModel write(const std::string& preset) {
    auto d = std::filesystem::temp_directory_path() / ("rlt_engine_test_" + preset + "_" + std::to_string(::getpid()));
    auto shape = model::random_checkpoint_preset(preset);
    if (!shape.ok() || !model::write_random_checkpoint(d.string(), *shape, shape->seed).ok())
      throw std::runtime_error("cannot write the " + preset + " checkpoint");
    TestModel m;
    m.dir = d.string();
    m.f32 = *model::load_ouro_model(m.dir);
    return m;
  }
  std::shared_ptr<const model::OuroModel> loaded(bool bf16_activations) {
    if (!bf16_activations) return f32;
    if (!bf16) bf16 = *model::load_ouro_model(dir, {.bf16_activations = true});
    return bf16;
  }
  int64_t loops() const { return f32->config.total_ut_steps; }
};

// The demo (Ouro: sandwich norms, exit gate, 4 loops) and nanbeige-tiny (a looped Llama: pre-norm
// layers, 2 loops, no gate, query heads wider than the hidden size).
TestModel& demo() {
  static TestModel m = TestModel::write("demo");
  return m;
}
TestModel& nanbeige() {
  static TestModel m = TestModel::write("nanbeige-tiny");
  return m;
}
// huginn-tiny (a prelude and a coda block with attention around 2 recurrent blocks x 8 steps,
// noise initial states, per-token exit criteria).
TestModel& huginn() {
  static TestModel m = TestModel::write("huginn-tiny");
  return m;
}

struct Expected {
  std::vector<int32_t> tokens;
  std::vector<int64_t> depths;
};

// Huginn's initial states come from the request's seed: the mixes give every request one.
Expected reference(TestModel& m, const std::vector<int32_t>& prompt, const SamplingParams& p,
                   model::KvSemantics semantics, bool bf16_activations) {
  model::ReferenceModel ref(m.loaded(bf16_activations), semantics, p.seed.value_or(0));
  auto r = ref.generate(prompt, p.max_tokens,
                        {p.min_loops, p.max_loops, p.exit_threshold, p.exit_criterion, p.exit_criterion_threshold},
                        p.ignore_eos);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return {r->tokens, r->exit_depths};
}

// Prompt logprobs come from the engine's prefill rows: each must equal, bit for bit, the same
// scoring of the reference model's row logits (its prompt computed whole, as the engine's must
// be even where a prefix cache holds part of it).
void check_prompt_logprobs(TestModel& m, const std::vector<int32_t>& prompt, const SamplingParams& p,
                           const RequestResult& o, model::KvSemantics semantics, bool bf16_activations) {
  if (!p.prompt_logprobs) {
    EXPECT_TRUE(o.prompt_logprobs.empty());
    return;
  }
  ASSERT_EQ(o.prompt_logprobs.size(), prompt.size() - 1);
  model::ReferenceModel ref(m.loaded(bf16_activations), semantics, p.seed.value_or(0));
  auto step = ref.prefill(prompt, /*trace=*/false, /*every_row_logits=*/true);
  ASSERT_TRUE(step.ok()) << step.status().to_string();
  const size_t vocab = step->row_logits.size() / prompt.size();
  for (size_t j = 0; j + 1 < prompt.size(); ++j) {
    SCOPED_TRACE(::testing::Message() << "prompt position " << j);
    auto want = sampling::score_token(std::span<const float>(step->row_logits).subspan(j * vocab, vocab),
                                      prompt[j + 1], *p.prompt_logprobs);
    ASSERT_TRUE(want.ok());
    const TokenLogprobs& got = o.prompt_logprobs[j];
    EXPECT_EQ(got.token, prompt[j + 1]);
    EXPECT_EQ(got.logprob, want->token.logprob);
    EXPECT_EQ(got.rank, want->rank);
    ASSERT_EQ(got.top.size(), static_cast<size_t>(want->token.top_logprobs.count));
    for (size_t k = 0; k < got.top.size(); ++k) {
      EXPECT_EQ(got.top[k].token, want->token.top_logprobs.items[k].token);
      EXPECT_EQ(got.top[k].logprob, want->token.top_logprobs.items[k].logprob);
    }
  }
}

struct Mix {
  TestModel* model = &demo();
  EngineConfig config;
  int requests = 6;
  double abort_probability = 0.0;
  bool shared_prefixes = false;
};

// Runs a random mix through the engine and checks every surviving request against the reference.
// Returns the engine's metrics after it drained.
EngineMetrics run_mix(const Mix& mix, uint32_t seed, model::KvSemantics semantics) {
  std::mt19937 rng(seed);
  std::mt19937 prompt_rng(seed ^ 0x5eedu);
  set_log_level(LogLevel::kWarn);
  auto engine = Engine::create(mix.config);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  struct Pending {
    uint64_t id;
    std::vector<int32_t> prompt;
    SamplingParams params;
    int arrival_step;
  };
  std::vector<Pending> plan;
  const std::vector<int32_t> common_prefix = {5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61, 65, 69, 73};
  for (int i = 0; i < mix.requests; ++i) {
    Pending p;
    p.id = 100 + static_cast<uint64_t>(i);
    const int len = std::uniform_int_distribution<int>(1, 40)(rng);
    if (mix.shared_prefixes && i % 2 == 0) p.prompt = common_prefix;
    for (int t = 0; t < len; ++t) p.prompt.push_back(std::uniform_int_distribution<int>(3, 258)(rng));
    p.params.temperature = 0.0;
    p.params.max_tokens = std::uniform_int_distribution<int>(1, 12)(rng);
    const double thresholds[] = {1.0, 0.5, 0.7, 0.9};
    p.params.exit_threshold = thresholds[rng() % 4];
    p.params.min_loops = 1 + static_cast<int>(rng() % 2);
    // Drawn for the demo's 4 loops; a model with fewer runs at most its own.
    p.params.max_loops = static_cast<int>(std::min<int64_t>(rng() % 3 == 0 ? 3 : 4, mix.model->loops()));
    p.params.min_loops = std::min(p.params.min_loops, p.params.max_loops);
    p.params.ignore_eos = rng() % 2 == 0;
    p.params.priority = static_cast<int>(rng() % 3);
    p.arrival_step = static_cast<int>(rng() % 12);
    // Drawn from a stream of its own, so that the mixes above stay what they were.
    if (prompt_rng() % 3 == 0) p.params.prompt_logprobs = static_cast<int>(prompt_rng() % 4);
    if (mix.model->f32->config.recurrent_injection()) {
      // Huginn: any of its criteria per request (now and then with another threshold), any
      // depth bound, and a seed for the initial states.
      const ExitCriterion criteria[] = {ExitCriterion::kNone, ExitCriterion::kLatentDiff, ExitCriterion::kEntropyDiff,
                                        ExitCriterion::kKl, ExitCriterion::kMinpKl, ExitCriterion::kArgmaxStability,
                                        ExitCriterion::kGate};
      p.params.exit_criterion = criteria[prompt_rng() % 7];
      if (prompt_rng() % 4 == 0 && p.params.exit_criterion == ExitCriterion::kLatentDiff)
        p.params.exit_criterion_threshold = 0.1;
      if (prompt_rng() % 4 == 0 && p.params.exit_criterion == ExitCriterion::kArgmaxStability)
        p.params.exit_criterion_threshold = 2;
      p.params.max_loops = prompt_rng() % 3 == 0 ? 5 : 0;
      p.params.min_loops = 1 + static_cast<int>(prompt_rng() % 3);
      p.params.seed = prompt_rng();
    }
    plan.push_back(std::move(p));
  }
  std::map<uint64_t, RequestResult> finals, gathered;
  std::map<uint64_t, int> final_count;
  std::set<uint64_t> aborted;
  size_t next = 0;
  std::sort(plan.begin(), plan.end(), [](const Pending& a, const Pending& b) { return a.arrival_step < b.arrival_step; });
  for (int step = 0; step < 5000; ++step) {
    while (next < plan.size() && plan[next].arrival_step <= step) {
      Status added = (*engine)->add_request(plan[next].id, plan[next].prompt, plan[next].params);
      EXPECT_TRUE(added.ok()) << added.to_string();
      ++next;
    }
    if (mix.abort_probability > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < mix.abort_probability) {
      const uint64_t victim = 100 + rng() % static_cast<uint64_t>(mix.requests);
      if (!finals.count(victim) && (*engine)->abort(victim).ok()) aborted.insert(victim);
    }
    auto outs = (*engine)->step();
    EXPECT_TRUE(outs.ok()) << outs.status().to_string();
    if (!outs.ok()) return {};
    for (auto& o : *outs) {
      gathered[o.request_id].append(o);
      if (!o.finished) continue;
      ++final_count[o.request_id];
      finals[o.request_id] = std::move(gathered[o.request_id]);
      gathered.erase(o.request_id);
    }
    if (next == plan.size() && !(*engine)->has_unfinished()) break;
  }
  EXPECT_FALSE((*engine)->has_unfinished()) << "the engine did not drain";
  EXPECT_EQ((*engine)->metrics().kv_used_blocks, 0) << "every page returns once the engine drained";
  EXPECT_EQ((*engine)->metrics().suspended, 0);
  for (const Pending& p : plan) {
    SCOPED_TRACE(::testing::Message() << "request " << p.id << " prompt " << p.prompt.size() << " max_tokens "
                                      << p.params.max_tokens << " threshold " << p.params.exit_threshold
                                      << " criterion " << name(p.params.exit_criterion));
    EXPECT_EQ(final_count[p.id], 1) << "every request ends with exactly one final output";
    const RequestResult& o = finals[p.id];
    if (aborted.count(p.id)) {
      EXPECT_EQ(o.finish_reason, "abort");
      continue;
    }
    const Expected e = reference(*mix.model, p.prompt, p.params, semantics,
                                 mix.config.activation_dtype == ActivationDType::kBF16);
    EXPECT_EQ(o.token_ids, e.tokens);
    std::vector<int64_t> depths(o.exit_depths.begin(), o.exit_depths.end());
    EXPECT_EQ(depths, e.depths);
    EXPECT_EQ(o.finish_reason, static_cast<int64_t>(e.tokens.size()) < p.params.max_tokens ? "stop" : "length");
    check_prompt_logprobs(*mix.model, p.prompt, p.params, o, semantics,
                          mix.config.activation_dtype == ActivationDType::kBF16);
  }
  return (*engine)->metrics();
}

EngineConfig base_config(const TestModel& m = demo()) {
  EngineConfig c;
  c.model = m.dir;
  c.kv_dtype = KVDType::kF32;
  c.attention_backend = "cpu_reference";
  c.block_size = 4;
  c.num_kv_blocks = 512;
  c.threads = 2;
  return c;
}

// Three mixes of eight requests in a pool of `blocks` blocks of 4 tokens, with preemption on;
// returns how many preemptions they needed.
int64_t preemptions_in_mixes(TestModel& m, int64_t blocks, uint32_t seed_base) {
  int64_t preemptions = 0;
  for (uint32_t seed = 0; seed < 3; ++seed) {
    Mix mix;
    mix.model = &m;
    mix.config = base_config(m);
    mix.config.block_size = 4;
    mix.config.num_kv_blocks = blocks;
    mix.config.enable_preemption = true;
    mix.config.incremental_kv = true;
    mix.config.watermark = 0.0;
    mix.config.max_num_seqs = 8;
    mix.requests = 8;
    preemptions += run_mix(mix, seed_base + seed, model::KvSemantics::kLastExited).preemptions;
  }
  return preemptions;
}

TEST(EngineEquivalence, RandomMixesMatchTheReferenceModelExactly) {
  int64_t prefix_hits = 0;
  bool early_exits = false;
  for (uint32_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937 rng(seed * 7919 + 1);
    Mix mix;
    mix.config = base_config();
    const int chunks[] = {1, 3, 8, 128};
    mix.config.prefill_chunk_size = chunks[rng() % 4];
    const int budgets[] = {4, 16, 128};
    mix.config.max_num_batched_tokens = budgets[rng() % 3];
    const int seqs[] = {1, 2, 8};
    mix.config.max_num_seqs = seqs[rng() % 3];
    mix.config.batch_mode = rng() % 2 ? BatchMode::kRefill : BatchMode::kNoRefill;
    mix.config.policy = rng() % 2 ? QueuePolicy::kFcfs : QueuePolicy::kPriority;
    mix.config.enable_prefix_caching = rng() % 2 == 0;
    mix.shared_prefixes = true;
    mix.config.block_size = rng() % 2 ? 4 : 16;
    mix.requests = 5 + static_cast<int>(rng() % 4);
    const EngineMetrics m = run_mix(mix, seed, model::KvSemantics::kLastExited);
    prefix_hits += m.prefix_hits;
    early_exits |= m.mean_loops_per_token < 4.0;
  }
  EXPECT_GT(prefix_hits, 0) << "the mixes must exercise prefix-cache hits";
  EXPECT_TRUE(early_exits) << "the mixes must exercise early exits";
}

TEST(EngineEquivalence, PreemptionUnderMemoryPressureIsLossless) {
  int64_t preemptions = 0;
  for (uint32_t seed = 0; seed < 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Mix mix;
    mix.config = base_config();
    mix.config.block_size = 4;
    mix.config.num_kv_blocks = 160;  // a few requests' worth: growth must preempt
    mix.config.enable_preemption = true;
    mix.config.incremental_kv = true;
    mix.config.watermark = 0.0;
    mix.config.max_num_seqs = 8;
    mix.config.policy = seed % 2 ? QueuePolicy::kPriority : QueuePolicy::kFcfs;
    mix.requests = 8;
    preemptions += run_mix(mix, 1000 + seed, model::KvSemantics::kLastExited).preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the pool is small enough that growth must preempt";
}

TEST(EngineEquivalence, CancellationsNeverDisturbOtherRequests) {
  for (uint32_t seed = 0; seed < 4; ++seed) {
    Mix mix;
    mix.config = base_config();
    mix.config.max_num_batched_tokens = 16;
    mix.abort_probability = 0.15;
    mix.requests = 8;
    run_mix(mix, 2000 + seed, model::KvSemantics::kLastExited);
  }
}

TEST(EngineEquivalence, SharedLayoutFollowsItsOwnSemantics) {
  for (uint32_t seed = 0; seed < 4; ++seed) {
    Mix mix;
    mix.config = base_config();
    mix.config.kv_layout = KVLayout::kShared;
    mix.config.prefill_chunk_size = seed % 2 ? 5 : 128;
    run_mix(mix, 3000 + seed, model::KvSemantics::kShared);
  }
}

// The bf16 dot-product kernel is as batch-invariant as the f32 one: the engine with bf16
// activations equals the reference model with bf16 activations bit for bit.
TEST(EngineEquivalence, Bf16ActivationsMatchTheReferenceWithBf16Activations) {
  if (!kernels::bf16_dot_supported()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  for (uint32_t seed = 0; seed < 3; ++seed) {
    Mix mix;
    mix.config = base_config();
    mix.config.activation_dtype = ActivationDType::kBF16;
    mix.config.prefill_chunk_size = seed == 0 ? 3 : 128;
    mix.config.max_num_seqs = seed == 1 ? 1 : 8;
    run_mix(mix, 5000 + seed, model::KvSemantics::kLastExited);
  }
}

TEST(EngineEquivalence, CpuFlashGivesTheSameGreedyTokensOnTheDemoModel) {
  // cpu_flash sums in another order (tiles, split-K), so bit-equality is not promised; on the
  // demo model the greedy tokens and depths still agree.
  Mix mix;
  mix.config = base_config();
  mix.config.attention_backend = "cpu_flash";
  run_mix(mix, 4000, model::KvSemantics::kLastExited);
}

// Nanbeige (every token through both loops of the whole stack, model.norm after each): random
// mixes under the scheduling knobs, preemption, and the shared layout, exactly the reference's.
TEST(EngineEquivalence, NanbeigeRandomMixesPreemptionAndBothLayouts) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937 rng(seed * 104729 + 3);
    Mix mix;
    mix.model = &nanbeige();
    mix.config = base_config(nanbeige());
    const int chunks[] = {1, 3, 8, 128};
    mix.config.prefill_chunk_size = chunks[rng() % 4];
    const int seqs[] = {1, 2, 8};
    mix.config.max_num_seqs = seqs[rng() % 3];
    mix.config.max_num_batched_tokens = seed % 2 ? 16 : 128;
    mix.config.enable_prefix_caching = seed % 3 == 0;
    mix.shared_prefixes = true;
    mix.requests = 6;
    run_mix(mix, 6000 + seed, model::KvSemantics::kLastExited);
  }
  // A few requests' worth of two planes: growth must preempt.
  EXPECT_GT(preemptions_in_mixes(nanbeige(), 80, 7000), 0) << "the pool is small enough that growth must preempt";
  for (uint32_t seed = 0; seed < 2; ++seed) {
    Mix mix;
    mix.model = &nanbeige();
    mix.config = base_config(nanbeige());
    mix.config.kv_layout = KVLayout::kShared;
    mix.config.prefill_chunk_size = seed % 2 ? 5 : 128;
    run_mix(mix, 8000 + seed, model::KvSemantics::kShared);
  }
}

// Huginn: the prelude and coda attend over their own K/V planes, every token starts from its
// seeded noise, and each request stops its tokens by its own criterion: rows at different steps
// share the recurrent batches. Random mixes under the scheduling knobs, cancellations and
// preemption give exactly the reference's tokens, exit depths and prompt logprobs.
TEST(EngineEquivalence, HuginnMixedCriteriaDepthsAndPreemption) {
  double loops = 0;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937 rng(seed * 6151 + 11);
    Mix mix;
    mix.model = &huginn();
    mix.config = base_config(huginn());
    const int chunks[] = {1, 3, 8, 128};
    mix.config.prefill_chunk_size = chunks[rng() % 4];
    const int budgets[] = {4, 16, 128};
    mix.config.max_num_batched_tokens = budgets[rng() % 3];
    const int seqs[] = {1, 2, 8};
    mix.config.max_num_seqs = seqs[rng() % 3];
    mix.config.batch_mode = rng() % 2 ? BatchMode::kRefill : BatchMode::kNoRefill;
    mix.config.block_size = rng() % 2 ? 4 : 16;
    mix.abort_probability = seed % 3 == 0 ? 0.1 : 0.0;
    mix.shared_prefixes = true;
    mix.requests = 6 + static_cast<int>(rng() % 3);
    loops = std::max(loops, 8.0 - run_mix(mix, 9000 + seed, model::KvSemantics::kLastExited).mean_loops_per_token);
  }
  EXPECT_GT(loops, 0.5) << "the mixes must stop tokens before the last step";
  // A few requests' worth of 8 + 1 planes: growth must preempt.
  EXPECT_GT(preemptions_in_mixes(huginn(), 200, 9500), 0) << "the pool is small enough that growth must preempt";
}

}  // namespace
}  // namespace rlt
