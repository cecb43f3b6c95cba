// A request's tokens depend only on its seed, params and logits: not on which requests share
// its batch, the order rows are sampled, which Sampler instance samples them, or preemption.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "sampling/sampler.h"

namespace rlt::sampling {
namespace {

constexpr int kVocab = 64;
constexpr int kSteps = 24;

// A toy "model": the next logits depend on the request, the step and the last token, so any
// divergence in earlier tokens shows up in later ones.
std::vector<float> toy_logits(int tag, int64_t step, int32_t last) {
  std::vector<float> logits(kVocab);
  for (int i = 0; i < kVocab; ++i) {
    logits[i] = static_cast<float>(3.0 * std::sin(0.7 * i + 1.3 * last + 0.1 * step + tag) +
                                   std::cos(0.23 * i * (tag + 1)));
  }
  return logits;
}

struct Spec {
  int tag;
  uint64_t seed;
  SamplingParams params;
  std::vector<int32_t> prompt;
  int start_step;  // when the request joins the batch
};

struct LiveRequest {
  const Spec* spec;
  TokenHistory history;
  RngState rng;
  std::vector<int32_t> tokens;
  int32_t last;

  explicit LiveRequest(const Spec& s)
      : spec(&s), history(s.prompt), rng(RngState::from_seed(s.seed)), last(s.prompt.back()) {}

  bool done() const { return static_cast<int>(tokens.size()) == kSteps; }
  void step(Sampler& sampler) {
    const auto logits = toy_logits(spec->tag, static_cast<int64_t>(tokens.size()), last);
    auto r = sampler.sample(logits, spec->params, history, rng);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    tokens.push_back(r->token);
    history.append(r->token);
    last = r->token;
  }
};

std::vector<Spec> specs() {
  std::vector<Spec> out;
  SamplingParams a;
  a.temperature = 0.8;
  a.top_p = 0.9;
  SamplingParams b;
  b.temperature = 1.2;
  b.top_k = 10;
  b.repetition_penalty = 1.2;
  SamplingParams c;
  c.min_p = 0.05;
  c.presence_penalty = 0.4;
  c.frequency_penalty = 0.2;
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.repetition_penalty = 1.3;
  out.push_back({0, 1, a, {1, 2, 3}, 0});
  out.push_back({1, 2, b, {4}, 3});
  out.push_back({2, 3, c, {5, 6}, 1});
  out.push_back({3, 4, greedy, {7, 8}, 0});
  out.push_back({4, 1, a, {1, 2, 3}, 5});  // same seed as request 0, different tag
  return out;
}

std::vector<int32_t> run_alone(const Spec& s) {
  Sampler sampler;
  LiveRequest r(s);
  while (!r.done()) r.step(sampler);
  return r.tokens;
}

// Runs all requests as a batch; `order(step, n)` gives the row order of a step.
std::vector<std::vector<int32_t>> run_batched(
    const std::vector<Spec>& all, const std::function<std::vector<int>(int, int)>& order) {
  Sampler sampler;
  std::vector<LiveRequest> live;
  for (const Spec& s : all) live.emplace_back(s);
  for (int step = 0; step < kSteps + 8; ++step) {
    for (int i : order(step, static_cast<int>(live.size()))) {
      if (step >= live[i].spec->start_step && !live[i].done()) live[i].step(sampler);
    }
  }
  std::vector<std::vector<int32_t>> out;
  for (const LiveRequest& r : live) out.push_back(r.tokens);
  return out;
}

TEST(SamplerDeterminism, SameSeedSameTokensWhateverTheBatchAndRowOrder) {
  const std::vector<Spec> all = specs();
  std::vector<std::vector<int32_t>> alone;
  for (const Spec& s : all) alone.push_back(run_alone(s));

  auto forward = [](int, int n) {
    std::vector<int> o(n);
    for (int i = 0; i < n; ++i) o[i] = i;
    return o;
  };
  auto reversed = [&](int step, int n) {
    auto o = forward(step, n);
    std::reverse(o.begin(), o.end());
    return o;
  };
  auto rotating = [&](int step, int n) {
    auto o = forward(step, n);
    std::rotate(o.begin(), o.begin() + step % n, o.end());
    return o;
  };
  auto scrambled = [&](int step, int n) {
    auto o = forward(step, n);
    std::sort(o.begin(), o.end(), [step](int a, int b) {
      return (a * 7919 + step * 104729) % 13 < (b * 7919 + step * 104729) % 13 ||
             ((a * 7919 + step * 104729) % 13 == (b * 7919 + step * 104729) % 13 && a < b);
    });
    return o;
  };
  for (const auto& order :
       {std::function<std::vector<int>(int, int)>(forward), {reversed}, {rotating}, {scrambled}}) {
    EXPECT_EQ(run_batched(all, order), alone);
  }
  EXPECT_NE(alone[0], alone[4]) << "the toy model must tell requests 0 and 4 apart";
}

TEST(SamplerDeterminism, PreemptionWithCopiedStateContinuesTheSameStream) {
  const std::vector<Spec> all = specs();
  for (const Spec& s : all) {
    const std::vector<int32_t> reference = run_alone(s);
    Sampler sampler;
    LiveRequest r(s);
    for (int i = 0; i < 9; ++i) r.step(sampler);

    // Preempt: keep a copy of the request (history, and the RNG as its two serialized words).
    const TokenHistory history = r.history;
    const uint64_t words[2] = {r.rng.seed, r.rng.counter};
    const std::vector<int32_t> tokens = r.tokens;
    const int32_t last = r.last;
    // Meanwhile the request's old slot and the sampler serve others.
    for (int i = 0; i < 5; ++i) r.step(sampler);
    LiveRequest other(all[(s.tag + 1) % all.size()]);
    for (int i = 0; i < 7; ++i) other.step(sampler);

    LiveRequest resumed(s);
    resumed.history = history;
    resumed.rng = RngState{words[0], words[1]};
    resumed.tokens = tokens;
    resumed.last = last;
    while (!resumed.done()) resumed.step(sampler);
    EXPECT_EQ(resumed.tokens, reference) << "request " << s.tag;
  }
}

}  // namespace
}  // namespace rlt::sampling
