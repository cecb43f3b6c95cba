// Asynchronous scheduling on the CPU runner (results arrive one submission late, as from a
// device): random request mixes give exactly the synchronous engine's tokens, exit depths and
// finish reasons under the same delayed exit policy, with cancellations and preemption mixed in.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "common/log.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"

namespace rlt {
namespace {

const std::string& demo_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() /
             ("rlt_async_engine_test_" + std::to_string(::getpid()));
    if (!model::write_demo_checkpoint(d.string()).ok())
      throw std::runtime_error("cannot write demo checkpoint");
    return d.string();
  }();
  return dir;
}

EngineConfig base_config() {
  EngineConfig c;
  c.model = demo_dir();
  c.kv_dtype = KVDType::kF32;
  c.attention_backend = "cpu_reference";  // batch-invariant: equal inputs give equal bits
  c.block_size = 4;
  c.num_kv_blocks = 512;
  c.threads = 2;
  c.exit_policy = ExitPolicy::kOuroDelayed;
  return c;
}

struct Planned {
  uint64_t id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  int arrival_step;
};

std::vector<Planned> plan_mix(uint32_t seed, int requests) {
  std::mt19937 rng(seed);
  std::mt19937 extra(seed ^ 0x5eedu);  // prompt logprobs and repeated prompts: a stream of its own
  std::vector<Planned> plan;
  for (int i = 0; i < requests; ++i) {
    Planned p;
    p.id = 100 + static_cast<uint64_t>(i);
    const int len = std::uniform_int_distribution<int>(1, 30)(rng);
    for (int t = 0; t < len; ++t)
      p.prompt.push_back(std::uniform_int_distribution<int>(3, 258)(rng));
    p.params.temperature =
        rng() % 3 == 0 ? 0.8 : 0.0;  // seeded sampling too: the RNG must stay in step
    p.params.seed = 17 + i;
    p.params.max_tokens = std::uniform_int_distribution<int>(1, 10)(rng);
    const double thresholds[] = {1.0, 0.5, 0.7, 0.9};
    p.params.exit_threshold = thresholds[rng() % 4];
    p.params.min_loops = 1 + static_cast<int>(rng() % 2);
    p.params.ignore_eos = rng() % 2 == 0;
    p.arrival_step = static_cast<int>(rng() % 10);
    // Repeated prompts meet in the prefix cache (shared-page waits); some requests score theirs.
    if (i > 0 && extra() % 3 == 0) p.prompt = plan.front().prompt;
    if (extra() % 3 == 0) p.params.prompt_logprobs = static_cast<int>(extra() % 3);
    plan.push_back(std::move(p));
  }
  std::sort(plan.begin(), plan.end(),
            [](const Planned& a, const Planned& b) { return a.arrival_step < b.arrival_step; });
  return plan;
}

struct MixResult {
  std::map<uint64_t, RequestResult> finals;
  std::set<uint64_t> aborted;
  EngineMetrics metrics;
};

MixResult run_mix(const EngineConfig& config, const std::vector<Planned>& plan,
                  double abort_probability, uint32_t seed) {
  set_log_level(LogLevel::kWarn);
  MixResult out;
  auto engine = Engine::create(config);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return out;
  std::mt19937 rng(seed);
  std::map<uint64_t, int> final_count;
  std::map<uint64_t, RequestResult> gathered;  // from the engine's delta outputs
  size_t next = 0;
  for (int step = 0; step < 20000; ++step) {
    while (next < plan.size() && plan[next].arrival_step <= step) {
      EXPECT_TRUE((*engine)->add_request(plan[next].id, plan[next].prompt, plan[next].params).ok());
      ++next;
    }
    if (abort_probability > 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng) < abort_probability) {
      const uint64_t victim = plan[rng() % plan.size()].id;
      if (!out.finals.count(victim) && (*engine)->abort(victim).ok()) out.aborted.insert(victim);
    }
    auto outs = (*engine)->step();
    EXPECT_TRUE(outs.ok()) << outs.status().to_string();
    if (!outs.ok()) return out;
    for (auto& o : *outs) {
      gathered[o.request_id].append(o);
      if (!o.finished) continue;
      ++final_count[o.request_id];
      out.finals[o.request_id] = std::move(gathered[o.request_id]);
      gathered.erase(o.request_id);
    }
    if (next == plan.size() && !(*engine)->has_unfinished()) break;
  }
  EXPECT_FALSE((*engine)->has_unfinished()) << "the engine did not drain";
  out.metrics = (*engine)->metrics();
  EXPECT_EQ(out.metrics.kv_used_blocks, 0) << "every page returns once the engine drained";
  for (const Planned& p : plan)
    EXPECT_EQ(final_count[p.id], 1) << "request " << p.id << ": one final output";
  return out;
}

void expect_same_outputs(const MixResult& sync, const MixResult& async) {
  for (const auto& [id, o] : async.finals) {
    if (async.aborted.count(id)) {
      EXPECT_EQ(o.finish_reason, "abort");
      continue;
    }
    SCOPED_TRACE(::testing::Message() << "request " << id);
    const RequestResult& s = sync.finals.at(id);
    EXPECT_EQ(o.token_ids, s.token_ids);
    EXPECT_EQ(o.exit_depths, s.exit_depths);
    EXPECT_EQ(o.finish_reason, s.finish_reason);
    ASSERT_EQ(o.prompt_logprobs.size(), s.prompt_logprobs.size());
    for (size_t j = 0; j < o.prompt_logprobs.size(); ++j) {
      EXPECT_EQ(o.prompt_logprobs[j].token, s.prompt_logprobs[j].token);
      EXPECT_EQ(o.prompt_logprobs[j].logprob, s.prompt_logprobs[j].logprob);
      EXPECT_EQ(o.prompt_logprobs[j].rank, s.prompt_logprobs[j].rank);
      EXPECT_EQ(o.prompt_logprobs[j].top.size(), s.prompt_logprobs[j].top.size());
    }
  }
}

TEST(AsyncEngine, RandomMixesEqualTheSynchronousEngine) {
  int64_t lookahead = 0, prefix_hits = 0;
  size_t scored = 0;
  bool early_exits = false;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937 rng(seed * 131 + 7);
    EngineConfig c = base_config();
    const int seqs[] = {1, 3, 8};
    c.max_num_seqs = seqs[rng() % 3];
    const int chunks[] = {3, 8, 128};
    c.prefill_chunk_size = chunks[rng() % 3];
    c.max_num_batched_tokens = rng() % 2 ? 16 : 128;
    c.batch_mode = rng() % 3 == 0 ? BatchMode::kNoRefill : BatchMode::kRefill;
    c.kv_layout = seed % 4 == 3 ? KVLayout::kShared : KVLayout::kLastExited;
    c.enable_prefix_caching = seed % 2 == 0;  // (refused under `shared`; seed 3 and 7 are odd)
    const std::vector<Planned> plan = plan_mix(seed, 4 + static_cast<int>(seed % 4));
    const MixResult sync = run_mix(c, plan, 0.0, seed);
    c.async_scheduling = true;
    const MixResult async = run_mix(c, plan, 0.0, seed);
    if (HasFailure()) return;
    expect_same_outputs(sync, async);
    EXPECT_EQ(sync.metrics.lookahead_batches, 0);
    lookahead += async.metrics.lookahead_batches;
    prefix_hits += async.metrics.prefix_hits;
    for (const auto& [id, o] : async.finals) scored += o.prompt_logprobs.empty() ? 0 : 1;
    early_exits |= async.metrics.mean_loops_per_token < 4.0;
  }
  EXPECT_GT(lookahead, 0) << "batches must be submitted while the previous one is in flight";
  EXPECT_TRUE(early_exits) << "the mixes must exercise early exits";
  EXPECT_GT(scored, 0u) << "the mixes must exercise prompt logprobs";
  EXPECT_GT(prefix_hits, 0) << "repeated prompts must meet in the prefix cache";
}

TEST(AsyncEngine, CancellationsAndPreemptionLoseNothing) {
  int64_t preemptions = 0;
  for (uint32_t seed = 0; seed < 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    EngineConfig c = base_config();
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 16;
    if (seed % 2) {
      c.num_kv_blocks = 120;  // small enough that growth must preempt
      c.enable_preemption = true;
      c.watermark = 0.0;
    } else if (seed >= 4) {
      c.num_kv_blocks = 90;  // small, without preemption: admission must hold requests back
      c.watermark = 0.0;
      c.prefill_chunk_size = 3;
    }
    const std::vector<Planned> plan = plan_mix(100 + seed, 8);
    const MixResult sync = run_mix(c, plan, 0.0, seed);
    c.async_scheduling = true;
    const MixResult async = run_mix(c, plan, seed % 2 ? 0.0 : 0.1, seed);
    if (HasFailure()) return;
    expect_same_outputs(sync, async);
    preemptions += async.metrics.preemptions;
  }
  EXPECT_GT(preemptions, 0) << "the small pool must preempt under asynchronous scheduling too";
}

// An id may be reused once its request was cancelled, even while a batch holding the old request
// is still in flight: the late results are recognized and ignored, and the new request produces
// exactly what it produces alone.
TEST(AsyncEngine, ReusingACancelledIdWhileItsBatchIsInFlight) {
  set_log_level(LogLevel::kWarn);
  EngineConfig c = base_config();
  c.async_scheduling = true;
  SamplingParams p;
  p.max_tokens = 6;
  p.ignore_eos = true;
  p.exit_threshold = 0.5;
  p.min_loops = 1;
  const std::vector<int32_t> first = {5, 6, 7}, second = {9, 10, 11, 12, 13};
  auto alone = Engine::create(c);
  ASSERT_TRUE(alone.ok());
  ASSERT_TRUE((*alone)->add_request(1, second, p).ok());
  RequestResult expected;
  while ((*alone)->has_unfinished()) {
    auto outs = (*alone)->step();
    ASSERT_TRUE(outs.ok());
    for (auto& o : *outs) expected.append(o);
  }
  for (int abort_at = 0; abort_at < 14; ++abort_at) {
    SCOPED_TRACE(::testing::Message() << "abort before step " << abort_at);
    auto engine = Engine::create(c);
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->add_request(1, first, p).ok());
    int aborted = 0, finished = 0;
    RequestResult last, current;
    for (int step = 0; step < 200 && (step <= abort_at || (*engine)->has_unfinished()); ++step) {
      if (step == abort_at && (*engine)->abort(1).ok()) {
        ASSERT_TRUE((*engine)->add_request(1, second, p).ok());
      }
      auto outs = (*engine)->step();
      ASSERT_TRUE(outs.ok()) << outs.status().to_string();
      for (auto& o : *outs) {
        current.append(o);
        if (!o.finished) continue;
        if (o.finish_reason == "abort") {
          ++aborted;
        } else {
          ++finished;
          last = current;
        }
        current = RequestResult();  // the id may start over as a new request
      }
    }
    if (aborted == 0) continue;  // the first request had finished before the abort
    EXPECT_EQ(aborted, 1);
    ASSERT_EQ(finished, 1);
    EXPECT_EQ(last.token_ids, expected.token_ids);
    EXPECT_EQ(last.exit_depths, expected.exit_depths);
    EXPECT_EQ((*engine)->metrics().kv_used_blocks, 0);
  }
}

TEST(AsyncEngine, RefusesAnUndelayedExitPolicyWithAFix) {
  EngineConfig c = base_config();
  c.exit_policy = ExitPolicy::kOuro;
  c.async_scheduling = true;
  auto engine = Engine::create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("--exit-policy ouro_delayed"), std::string::npos)
      << engine.status().to_string();
}

}  // namespace
}  // namespace rlt
