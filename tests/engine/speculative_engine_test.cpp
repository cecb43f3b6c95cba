// Speculative decoding against plain decoding on the CPU runner: for every configuration of a
// sweep (drafter, K, draft loops, concurrency, K/V dtype, preemption, layout where allowed) the
// same requests give exactly plain decoding's tokens, exit depths, logprobs and finish reasons —
// greedy and seeded sampling alike (verification samples each position with the uniform plain
// decoding draws there). The batch-invariant kernels make it exact, not approximately equal.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "common/log.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"

namespace rlt {
namespace {

std::string temp_model(const std::string& tag, int64_t loops) {
  auto d = std::filesystem::temp_directory_path() / ("rlt_spec_test_" + tag + "_" + std::to_string(::getpid()));
  if (loops == 4) {
    if (!model::write_demo_checkpoint(d.string()).ok()) throw std::runtime_error("cannot write demo checkpoint");
  } else {
    auto shape = model::random_checkpoint_preset("demo");
    if (!shape.ok()) throw std::runtime_error("no demo shape");
    shape->loops = loops;
    if (!model::write_random_checkpoint(d.string(), *shape, 11).ok())
      throw std::runtime_error("cannot write a random checkpoint");
  }
  return d.string();
}

const std::string& looped_model() {
  static const std::string dir = temp_model("looped", 4);
  return dir;
}
const std::string& one_loop_model() {
  static const std::string dir = temp_model("one_loop", 1);
  return dir;
}

struct Planned {
  uint64_t id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  int arrival_step;
};

// Prompts that repeat themselves (so that prompt lookup finds continuations), greedy and seeded
// sampling, penalties and logprobs now and then, staggered arrivals.
std::vector<Planned> plan_mix(uint32_t seed, int requests) {
  std::mt19937 rng(seed);
  std::vector<Planned> plan;
  for (int i = 0; i < requests; ++i) {
    Planned p;
    p.id = 500 + static_cast<uint64_t>(i);
    const int motif = std::uniform_int_distribution<int>(2, 9)(rng);
    std::vector<int32_t> m;
    for (int t = 0; t < motif; ++t) m.push_back(std::uniform_int_distribution<int>(3, 258)(rng));
    const int repeats = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int r = 0; r < repeats; ++r) p.prompt.insert(p.prompt.end(), m.begin(), m.end());
    p.params.temperature = rng() % 3 == 0 ? 0.8 : 0.0;
    p.params.seed = 31 + i;
    p.params.max_tokens = std::uniform_int_distribution<int>(1, 24)(rng);
    p.params.ignore_eos = rng() % 2 == 0;
    if (rng() % 4 == 0) p.params.repetition_penalty = 1.3;
    if (rng() % 4 == 0) p.params.logprobs = static_cast<int>(rng() % 3);
    p.arrival_step = static_cast<int>(rng() % 12);
    plan.push_back(std::move(p));
  }
  std::stable_sort(plan.begin(), plan.end(),
                   [](const Planned& a, const Planned& b) { return a.arrival_step < b.arrival_step; });
  return plan;
}

struct RunResult {
  std::map<uint64_t, RequestResult> finals;
  EngineMetrics metrics;
};

RunResult run(const EngineConfig& config, const std::vector<Planned>& plan) {
  set_log_level(LogLevel::kWarn);
  RunResult out;
  auto engine = Engine::create(config);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return out;
  std::map<uint64_t, RequestResult> gathered;
  size_t next = 0;
  for (int step = 0; step < 50000; ++step) {
    while (next < plan.size() && plan[next].arrival_step <= step) {
      const Status added = (*engine)->add_request(plan[next].id, plan[next].prompt, plan[next].params);
      EXPECT_TRUE(added.ok()) << added.to_string();
      ++next;
    }
    auto outs = (*engine)->step();
    EXPECT_TRUE(outs.ok()) << outs.status().to_string();
    if (!outs.ok()) return out;
    for (auto& o : *outs) {
      gathered[o.request_id].append(o);
      if (!o.finished) continue;
      EXPECT_FALSE(out.finals.count(o.request_id)) << "a second final output";
      out.finals[o.request_id] = std::move(gathered[o.request_id]);
    }
    if (next == plan.size() && !(*engine)->has_unfinished()) break;
  }
  out.metrics = (*engine)->metrics();
  EXPECT_EQ(out.metrics.kv_used_blocks, 0) << "every page returns once the engine drained";
  return out;
}

// Whether two runs agree on everything a request reports; the first difference is reported.
bool same(const RunResult& plain, const RunResult& spec, std::string* why) {
  if (plain.finals.size() != spec.finals.size()) {
    *why = "a different number of finished requests";
    return false;
  }
  for (const auto& [id, p] : plain.finals) {
    const RequestResult& s = spec.finals.at(id);
    auto differ = [&](const char* what) {
      *why = std::string("request ") + std::to_string(id) + ": " + what;
      return false;
    };
    if (s.token_ids != p.token_ids) return differ("tokens");
    if (s.exit_depths != p.exit_depths) return differ("exit depths");
    if (s.finish_reason != p.finish_reason) return differ("finish reason");
    if (s.text != p.text) return differ("text");
    if (s.logprobs.size() != p.logprobs.size()) return differ("logprob count");
    for (size_t j = 0; j < p.logprobs.size(); ++j) {
      if (s.logprobs[j].token != p.logprobs[j].token || s.logprobs[j].logprob != p.logprobs[j].logprob ||
          s.logprobs[j].top.size() != p.logprobs[j].top.size())
        return differ("logprobs");
    }
  }
  return true;
}

EngineConfig base_config(const std::string& model, int concurrency, KVDType kv, bool preempt) {
  EngineConfig c;
  c.model = model;
  c.kv_dtype = kv;
  c.attention_backend = "cpu_reference";
  c.block_size = 4;
  c.threads = 2;
  c.max_num_seqs = concurrency;
  c.max_num_batched_tokens = 64;
  c.prefill_chunk_size = 16;
  c.enable_preemption = preempt;
  // A pool small enough that growth preempts (with preemption), else roomy.
  c.num_kv_blocks = preempt ? 160 : 4096;
  return c;
}

// `c` with every request drafting by `method` (K drafts, D draft loops), every draft verified:
// the most rows, the hardest case, and no dependence on measured timings.
EngineConfig speculating(EngineConfig c, SpeculativeMethod method, int k, int d) {
  c.speculative.method = method;
  c.speculative.num_tokens = k;
  c.speculative.draft_loops = d;
  c.speculative.adaptive = false;
  return c;
}

struct SweepTotals {
  int configs = 0, identical = 0;
  int64_t drafts = 0, accepted = 0, preemptions = 0;
};

void sweep(SpeculativeMethod method, const std::vector<int>& draft_loops, SweepTotals& totals) {
  const std::vector<int> ks{1, 2, 4, 8};
  for (int concurrency : {1, 4, 16}) {
    const auto plan = plan_mix(100 + static_cast<uint32_t>(concurrency), concurrency == 1 ? 4 : 2 * concurrency);
    for (KVDType kv : {KVDType::kF32, KVDType::kBF16}) {
      for (bool preempt : {false, true}) {
        const EngineConfig plain_config = base_config(looped_model(), concurrency, kv, preempt);
        const RunResult plain = run(plain_config, plan);
        for (int k : ks) {
          for (int d : draft_loops) {
            SCOPED_TRACE(::testing::Message() << name(method) << " K " << k << " D " << d << " concurrency "
                                              << concurrency << " kv " << name(kv) << " preemption " << preempt);
            const RunResult spec = run(speculating(plain_config, method, k, d), plan);
            std::string why;
            const bool ok = same(plain, spec, &why);
            EXPECT_TRUE(ok) << why;
            ++totals.configs;
            totals.identical += ok;
            totals.drafts += spec.metrics.spec_draft_tokens;
            totals.accepted += spec.metrics.spec_accepted_tokens;
            totals.preemptions += spec.metrics.preemptions;
          }
        }
      }
    }
  }
}

// Prints the sweep's count and checks that it exercised both outcomes of verification, and
// preemption.
void expect_all_identical(const char* what, const SweepTotals& t) {
  std::printf("%s: %d/%d configurations identical to plain decoding; %lld drafts, %lld accepted, %lld "
              "preemptions\n",
              what, t.identical, t.configs, static_cast<long long>(t.drafts), static_cast<long long>(t.accepted),
              static_cast<long long>(t.preemptions));
  EXPECT_EQ(t.identical, t.configs);
  EXPECT_GT(t.accepted, 0);
  EXPECT_LT(t.accepted, t.drafts);
  EXPECT_GT(t.preemptions, 0);
}

TEST(SpeculativeEngine, NgramDraftsGivePlainDecodingInEveryConfiguration) {
  SweepTotals t;
  sweep(SpeculativeMethod::kNgram, {0}, t);
  expect_all_identical("ngram", t);
}

TEST(SpeculativeEngine, SelfDraftsGivePlainDecodingInEveryConfiguration) {
  SweepTotals t;
  sweep(SpeculativeMethod::kSelf, {1, 2, 3}, t);
  expect_all_identical("self", t);
}

// One loop (a Llama-shaped model): the `shared` layout holds the same K/V as `last_exited`, so
// prompt lookup is allowed there too; no-refill cohorts and adaptive K as well.
TEST(SpeculativeEngine, OneLoopModelsBothLayoutsAndModes) {
  const auto plan = plan_mix(7, 12);
  for (KVLayout layout : {KVLayout::kLastExited, KVLayout::kShared}) {
    for (BatchMode mode : {BatchMode::kRefill, BatchMode::kNoRefill}) {
      for (bool adaptive : {false, true}) {
        SCOPED_TRACE(::testing::Message() << name(layout) << " " << name(mode) << " adaptive " << adaptive);
        EngineConfig c = base_config(one_loop_model(), 4, KVDType::kF32, false);
        c.kv_layout = layout;
        c.batch_mode = mode;
        const RunResult plain = run(c, plan);
        c.speculative.method = SpeculativeMethod::kNgram;
        c.speculative.adaptive = adaptive;
        const RunResult spec = run(c, plan);
        std::string why;
        EXPECT_TRUE(same(plain, spec, &why)) << why;
        // Adaptive K follows measured timings (on a loaded machine it may verify no draft at all).
        if (!adaptive) {
          EXPECT_GT(spec.metrics.spec_verifications, 0);
        }
      }
    }
  }
}

// Sampling: the token at each output position, over many seeds, is distributed as plain
// sampling's (a two-sample chi-square test of homogeneity on disjoint seed sets, so that the test
// does not lean on rlt's stronger property), and a seed reproduces its tokens exactly.
double chi_square_critical(double dof) {
  // Wilson–Hilferty: the 99.9th percentile of chi-square with `dof` degrees of freedom.
  const double z = 3.090, h = 2.0 / (9.0 * dof);
  return dof * std::pow(1.0 - h + z * std::sqrt(h), 3);
}

// cpu_flash (the CPU's default backend) past 512 keys, where a single-query row splits its keys
// into ranges: a verification's packed rows must split alike, or logprobs differ in their last
// bits and near-ties flip.
TEST(SpeculativeEngine, LongContextsWithTheDefaultCpuBackend) {
  std::mt19937 rng(3);
  std::vector<Planned> plan;
  for (int i = 0; i < 4; ++i) {
    Planned p;
    p.id = 900 + static_cast<uint64_t>(i);
    std::vector<int32_t> motif;
    for (int t = 0; t < 7 + i; ++t) motif.push_back(std::uniform_int_distribution<int>(3, 258)(rng));
    while (p.prompt.size() < 495 + 10 * static_cast<size_t>(i)) p.prompt.insert(p.prompt.end(), motif.begin(), motif.end());
    p.params.max_tokens = 40;
    p.params.ignore_eos = true;
    p.params.logprobs = 1;
    p.params.temperature = i % 2 ? 0.8 : 0.0;
    p.params.seed = 5 + i;
    p.arrival_step = i;
    plan.push_back(std::move(p));
  }
  EngineConfig c = base_config(looped_model(), 4, KVDType::kBF16, false);
  c.attention_backend = "cpu_flash";
  c.block_size = 16;
  c.num_kv_blocks = 1024;
  c.max_num_batched_tokens = 128;
  c.prefill_chunk_size = 128;
  const RunResult plain = run(c, plan);
  for (SpeculativeMethod method : {SpeculativeMethod::kNgram, SpeculativeMethod::kSelf}) {
    SCOPED_TRACE(name(method));
    const RunResult spec = run(speculating(c, method, 4, 2), plan);
    std::string why;
    EXPECT_TRUE(same(plain, spec, &why)) << why;
    EXPECT_GT(spec.metrics.spec_accepted_tokens, 0);
  }
}

// A Q8_0 K/V cache (--kv-dtype q8_0) keeps the engine's guarantees: preemption to host memory
// and back, and speculative verification (prompt lookup and self drafts, both K/V layouts' default
// here), give the same outputs as plain decoding over the same cache, bit for bit.
TEST(SpeculativeEngine, Q8_0KVCacheKeepsPreemptionAndSpeculationExact) {
  const auto plan = plan_mix(808, 8);
  EngineConfig c = base_config(looped_model(), 4, KVDType::kQ8_0, false);
  c.attention_backend = "cpu_flash";
  const RunResult plain = run(c, plan);
  ASSERT_EQ(plain.finals.size(), plan.size());
  for (bool preempt : {false, true}) {
    EngineConfig pc = base_config(looped_model(), 4, KVDType::kQ8_0, preempt);
    pc.attention_backend = "cpu_flash";
    if (preempt) pc.num_kv_blocks = 64;  // four requests' growth cannot all fit
    std::string why;
    if (preempt) {
      const RunResult preempted = run(pc, plan);
      EXPECT_GT(preempted.metrics.preemptions, 0);
      EXPECT_TRUE(same(plain, preempted, &why)) << why;
    }
    for (SpeculativeMethod method : {SpeculativeMethod::kNgram, SpeculativeMethod::kSelf}) {
      SCOPED_TRACE(::testing::Message() << name(method) << " preemption " << preempt);
      const RunResult spec = run(speculating(pc, method, 4, 2), plan);
      EXPECT_TRUE(same(plain, spec, &why)) << why;
      EXPECT_GT(spec.metrics.spec_accepted_tokens, 0);
    }
  }
}

// Asynchronous scheduling, prefix caching (repeated prompts), preemption and cancellations at
// random steps together: a request that was not cancelled gives plain decoding's output; one that
// was has produced a prefix of it.
TEST(SpeculativeEngine, AsyncPrefixCachingPreemptionAndCancellations) {
  auto plan = plan_mix(41, 14);
  for (size_t i = 1; i < plan.size(); i += 3) plan[i].prompt = plan[0].prompt;  // shared prompt pages
  for (size_t i = 0; i < plan.size(); i += 4) plan[i].params.stop_token_ids = {plan[i].prompt.back(), 7, 11};
  EngineConfig c = base_config(looped_model(), 4, KVDType::kF32, true);
  c.exit_policy = ExitPolicy::kOuroDelayed;
  c.async_scheduling = true;
  c.enable_prefix_caching = true;
  const RunResult plain = run(c, plan);
  for (SpeculativeMethod method : {SpeculativeMethod::kNgram, SpeculativeMethod::kSelf}) {
    for (uint32_t abort_seed : {0u, 1u, 2u}) {
      SCOPED_TRACE(::testing::Message() << name(method) << " abort seed " << abort_seed);
      EngineConfig sc = c;
      sc.speculative.method = method;
      sc.speculative.num_tokens = 3;
      sc.speculative.draft_loops = 1;
      set_log_level(LogLevel::kWarn);
      auto engine = Engine::create(sc);
      ASSERT_TRUE(engine.ok()) << engine.status().to_string();
      std::mt19937 rng(abort_seed);
      std::map<uint64_t, RequestResult> gathered, finals;
      std::set<uint64_t> aborted;
      size_t next = 0;
      for (int step = 0; step < 50000; ++step) {
        while (next < plan.size() && plan[next].arrival_step <= step) {
          ASSERT_TRUE((*engine)->add_request(plan[next].id, plan[next].prompt, plan[next].params).ok());
          ++next;
        }
        if (abort_seed > 0 && rng() % 9 == 0) {
          const uint64_t victim = plan[rng() % plan.size()].id;
          if (!finals.count(victim) && (*engine)->abort(victim).ok()) aborted.insert(victim);
        }
        auto outs = (*engine)->step();
        ASSERT_TRUE(outs.ok()) << outs.status().to_string();
        for (auto& o : *outs) {
          gathered[o.request_id].append(o);
          if (o.finished) finals[o.request_id] = gathered[o.request_id];
        }
        if (next == plan.size() && !(*engine)->has_unfinished()) break;
      }
      EXPECT_EQ((*engine)->metrics().kv_used_blocks, 0);
      ASSERT_EQ(finals.size(), plan.size());
      for (const auto& [id, r] : finals) {
        const RequestResult& p = plain.finals.at(id);
        if (aborted.count(id)) {
          EXPECT_EQ(r.finish_reason, "abort");
          ASSERT_LE(r.token_ids.size(), p.token_ids.size()) << id;
          EXPECT_TRUE(std::equal(r.token_ids.begin(), r.token_ids.end(), p.token_ids.begin())) << id;
        } else {
          EXPECT_EQ(r.token_ids, p.token_ids) << id;
          EXPECT_EQ(r.exit_depths, p.exit_depths) << id;
          EXPECT_EQ(r.finish_reason, p.finish_reason) << id;
        }
      }
    }
  }
}

// Speculation set for the whole engine gives way, per request, to settings it cannot verify
// exactly (early exit here): those requests decode plainly, with plain decoding's output.
TEST(SpeculativeEngine, TheEngineDefaultGivesWayToEarlyExit) {
  auto plan = plan_mix(77, 6);
  for (size_t i = 0; i < plan.size(); i += 2) {
    plan[i].params.exit_threshold = 0.6;
    plan[i].params.min_loops = 1;
  }
  EngineConfig c = base_config(looped_model(), 4, KVDType::kF32, false);
  const RunResult plain = run(c, plan);
  c.speculative.method = SpeculativeMethod::kNgram;
  c.speculative.adaptive = false;  // drafts whenever there are some, whatever the timings
  const RunResult spec = run(c, plan);
  std::string why;
  EXPECT_TRUE(same(plain, spec, &why)) << why;
  bool early = false;
  for (const auto& [id, r] : spec.finals)
    for (int32_t d : r.exit_depths) early |= d < 4;
  EXPECT_TRUE(early) << "some tokens exited early";
  EXPECT_GT(spec.metrics.spec_verifications, 0);
}

// Two-sample chi-square statistic of homogeneity for the token at output position `pos` of two
// runs of equally many requests; tokens seen fewer than 10 times in both together share a cell.
double chi_square(const RunResult& a, const RunResult& b, size_t pos, double* dof) {
  std::map<int32_t, std::pair<double, double>> counts;
  for (const auto& [id, r] : a.finals) counts[r.token_ids.at(pos)].first += 1;
  for (const auto& [id, r] : b.finals) counts[r.token_ids.at(pos)].second += 1;
  std::vector<std::pair<double, double>> cells(1);
  for (const auto& [token, n] : counts) {
    if (n.first + n.second >= 10) {
      cells.push_back(n);
    } else {
      cells[0].first += n.first;
      cells[0].second += n.second;
    }
  }
  if (cells[0].first + cells[0].second == 0) cells.erase(cells.begin());
  double chi = 0;
  for (const auto& [x, y] : cells) {
    const double expected = (x + y) / 2;
    chi += (x - expected) * (x - expected) / expected + (y - expected) * (y - expected) / expected;
  }
  *dof = static_cast<double>(cells.size()) - 1;
  return chi;
}

TEST(SpeculativeEngine, SampledTokensFollowPlainSamplingsDistribution) {
  constexpr int kSeeds = 1000;
  const std::vector<int32_t> prompt{40, 41, 42, 43, 40, 41, 42, 43, 40, 41};
  auto plan_for = [&](uint64_t first_seed, double temperature) {
    std::vector<Planned> plan;
    for (int i = 0; i < kSeeds; ++i) {
      Planned p;
      p.id = static_cast<uint64_t>(i);
      p.prompt = prompt;
      p.params.temperature = temperature;
      p.params.top_k = 40;
      p.params.seed = first_seed + static_cast<uint64_t>(i);
      p.params.max_tokens = 4;
      p.params.ignore_eos = true;
      p.arrival_step = 0;
      plan.push_back(std::move(p));
    }
    return plan;
  };
  EngineConfig c = base_config(looped_model(), 16, KVDType::kF32, false);
  c.num_kv_blocks = 2048;
  const RunResult plain = run(c, plan_for(1, 0.7));
  // The test has power: another temperature is told apart.
  const RunResult hotter = run(c, plan_for(1 + 2 * kSeeds, 1.0));
  double worst = 0, dof = 0;
  for (size_t pos = 1; pos < 4; ++pos)
    worst = std::max(worst, chi_square(plain, hotter, pos, &dof) / chi_square_critical(dof));
  EXPECT_GT(worst, 1.0) << "temperature 0.7 against 1.0 should fail the test";
  for (SpeculativeMethod method : {SpeculativeMethod::kNgram, SpeculativeMethod::kSelf}) {
    SCOPED_TRACE(name(method));
    const EngineConfig sc = speculating(c, method, 3, 2);
    const RunResult spec = run(sc, plan_for(1 + kSeeds, 0.7));  // other seeds: an independent sample
    EXPECT_GT(spec.metrics.spec_accepted_tokens, 0);
    for (size_t pos = 1; pos < 4; ++pos) {
      const double chi = chi_square(plain, spec, pos, &dof);
      ASSERT_GE(dof, 2) << "position " << pos << ": too few distinct tokens to test";
      EXPECT_LT(chi, chi_square_critical(dof)) << "position " << pos << ", " << dof + 1 << " cells";
    }
    // The same seeds with speculation give plain sampling's very tokens.
    const RunResult same_seeds = run(sc, plan_for(1, 0.7));
    std::string why;
    EXPECT_TRUE(same(plain, same_seeds, &why)) << why;
  }
}

}  // namespace
}  // namespace rlt
