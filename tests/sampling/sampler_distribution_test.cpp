// The sampler draws from the processed distribution: the processed distribution is compared with
// an independent double-precision restatement of docs/sampling.md, and many draws with a
// chi-square goodness-of-fit test. Seeds are fixed, so every statistic is a constant: the tests
// cannot flake, yet a wrong inverse CDF, an off-by-one or a biased uniform fails them by orders
// of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "sampler_test_util.h"
#include "sampling/sampler.h"

namespace rlt::sampling {
namespace {

using sampler_testing::expect_probs_near;

constexpr double kNegInfD = -std::numeric_limits<double>::infinity();

// The processing order of docs/sampling.md, in double, straight from the text.
std::vector<double> reference_probs(std::vector<double> x, const SamplingParams& p,
                                    const std::vector<int32_t>& prompt,
                                    const std::vector<int32_t>& generated) {
  std::vector<int32_t> distinct = prompt;
  distinct.insert(distinct.end(), generated.begin(), generated.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  for (int32_t t : distinct) {
    x[t] = x[t] > 0 ? x[t] / p.repetition_penalty : x[t] * p.repetition_penalty;
  }
  for (size_t t = 0; t < x.size(); ++t) {
    const auto count = std::count(generated.begin(), generated.end(), static_cast<int32_t>(t));
    if (count > 0) x[t] -= p.frequency_penalty * count + p.presence_penalty;
  }
  const double max = *std::max_element(x.begin(), x.end());
  for (double& v : x) v = (v - max) / p.temperature;
  const size_t vocab = x.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) {
    std::vector<double> sorted = x;
    std::sort(sorted.rbegin(), sorted.rend());
    const double threshold = sorted[p.top_k - 1];
    for (double& v : x) v = v < threshold ? kNegInfD : v;
  }
  if (p.top_p < 1.0) {
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    double total = 0.0;
    for (int32_t i : order) total += std::exp(x[i]);
    double cumulative = 0.0;
    bool removing = false;
    for (int32_t i : order) {
      if (removing) x[i] = kNegInfD;
      cumulative += std::exp(x[i]) / total;
      removing = removing || cumulative > p.top_p;
    }
  }
  for (double& v : x) v = std::exp(v) < p.min_p ? kNegInfD : v;
  return sampler_testing::softmax(x);
}

// Pearson's statistic of `draws` samples against `probs`, over the categories with p > 0; every
// draw of a p = 0 category fails the test.
double chi_square(const std::vector<double>& probs, const std::vector<int64_t>& counts,
                  int64_t draws, int* degrees_of_freedom) {
  double chi2 = 0.0;
  int categories = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = probs[i] * static_cast<double>(draws);
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++categories;
  }
  *degrees_of_freedom = categories - 1;
  return chi2;
}

std::vector<int64_t> draw_counts(const std::vector<float>& logits, const SamplingParams& params,
                                 const TokenHistory& history, uint64_t seed, int64_t draws) {
  Sampler sampler;
  RngState rng = RngState::from_seed(seed);
  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t i = 0; i < draws; ++i) {
    auto r = sampler.sample(logits, params, history, rng);
    EXPECT_TRUE(r.ok());
    if (r.ok()) ++counts[r->token];
  }
  return counts;
}

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

TEST(SamplerDistribution, TopPMatchesTheReferenceOnLargeRowsWithTies) {
  // 3000 logits on a 1/8 grid (exact in f32, many ties), so the sampler's f32 shift and the
  // reference's double arithmetic order the row identically; the kept sets span the sampler's
  // prefix-growing rounds (256, 1024, 3000 ids).
  std::vector<double> logits(3000);
  for (size_t i = 0; i < logits.size(); ++i) {
    logits[i] = std::round(8.0 * 2.5 * std::sin(0.61 * i) * std::cos(0.0029 * i)) / 8.0;
  }
  for (double top_p : {0.05, 0.3, 0.6, 0.9, 0.999}) {
    SamplingParams p;
    p.top_p = top_p;
    const std::vector<double> expected = reference_probs(logits, p, {}, {});
    const std::vector<double> actual = sampler_testing::processed(to_float(logits), p);
    EXPECT_EQ(sampler_testing::support(actual), sampler_testing::support(expected))
        << "top_p " << top_p;
    expect_probs_near(actual, expected, 1e-9);
  }
}

// 200,000 draws per case; the bound is the chi-square 0.999 quantile for the case's degrees of
// freedom (4: 18.467; 7: 24.322), i.e. a correct sampler would exceed it for 1 seed in 1000.
constexpr int64_t kDraws = 200000;

TEST(SamplerDistribution, TemperatureTopKTopPChiSquare) {
  const std::vector<double> logits = {2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0};
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 6;     // drops ids 6, 7
  p.top_p = 0.95;  // cumsum 0.442, 0.696, 0.841, 0.925 | 0.973: drops id 5
  const std::vector<double> expected = reference_probs(logits, p, {}, {});
  EXPECT_EQ(sampler_testing::support(expected), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  expect_probs_near(sampler_testing::processed(to_float(logits), p), expected);

  const auto counts = draw_counts(to_float(logits), p, {}, 20240601, kDraws);
  int dof = 0;
  const double chi2 = chi_square(expected, counts, kDraws, &dof);
  EXPECT_EQ(dof, 4);
  EXPECT_LT(chi2, 18.467);  // measured: 0.53
}

TEST(SamplerDistribution, PenaltiesTemperatureMinPChiSquare) {
  const std::vector<double> logits = {1.2, 0.3, -0.4, 2.1, 0.0, -1.5, 0.8, 1.9, -0.2, 0.6};
  const std::vector<int32_t> prompt = {3, 5};
  const std::vector<int32_t> generated = {7, 7, 0, 3};
  SamplingParams p;
  p.repetition_penalty = 1.3;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.3;
  p.temperature = 1.4;
  p.min_p = 0.45;  // ratios to the max: id 2 0.420 and id 5 0.139 go; id 8 0.484 stays
  TokenHistory history(prompt);
  for (int32_t t : generated) history.append(t);
  const std::vector<double> expected = reference_probs(logits, p, prompt, generated);
  EXPECT_EQ(sampler_testing::support(expected), (std::vector<int32_t>{0, 1, 3, 4, 6, 7, 8, 9}));
  expect_probs_near(sampler_testing::processed(to_float(logits), p, history), expected);

  const auto counts = draw_counts(to_float(logits), p, history, 77, kDraws);
  int dof = 0;
  const double chi2 = chi_square(expected, counts, kDraws, &dof);
  EXPECT_EQ(dof, 7);
  EXPECT_LT(chi2, 24.322);  // measured: 3.35
}

}  // namespace
}  // namespace rlt::sampling
