// Adaptive draft counts: the acceptance estimate, the verify cost fit, and the allocation's
// rules (drafts only while they raise tokens per second, never past the row budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "spec/draft_budget.h"

namespace rlt::spec {
namespace {

TEST(AcceptanceEstimate, FollowsWhatItSees) {
  AcceptanceEstimate a;
  const double prior = a.rate();
  EXPECT_GT(prior, 0.3);  // a new request drafts
  for (int i = 0; i < 40; ++i) a.observe(4, 4);  // everything accepted
  EXPECT_GT(a.rate(), 0.95);
  for (int i = 0; i < 40; ++i) a.observe(4, 0);  // everything rejected
  EXPECT_LT(a.rate(), 0.1);
  AcceptanceEstimate half;
  for (int i = 0; i < 200; ++i) half.observe(8, 1);  // one accepted, then a rejection: 1 of 2 trials
  EXPECT_NEAR(half.rate(), 0.5, 0.01);
  AcceptanceEstimate same;
  same.observe(0, 0);  // nothing drafted: nothing learned
  EXPECT_EQ(same.rate(), prior);
  // Steps without drafts bring a bad estimate back toward the prior: drafting is tried again.
  for (int i = 0; i < 60; ++i) a.idle();
  EXPECT_NEAR(a.rate(), prior, 0.1);
}

TEST(VerifyCostModel, RecoversALinearCost) {
  VerifyCostModel m;
  EXPECT_TRUE(m.needs_variation());
  EXPECT_DOUBLE_EQ(m.per_row() / m.fixed(), 0.2);  // until measured, a row costs a fifth of a pass
  std::mt19937 rng(3);
  for (int i = 0; i < 400; ++i) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 40);
    const double noise = std::uniform_real_distribution<double>(-1e-5, 1e-5)(rng);
    m.observe(rows, 2e-3 + 1e-4 * static_cast<double>(rows) + noise);
  }
  EXPECT_FALSE(m.needs_variation());
  EXPECT_NEAR(m.fixed(), 2e-3, 1e-4);
  EXPECT_NEAR(m.per_row(), 1e-4, 1e-5);
  VerifyCostModel flat;
  for (int i = 0; i < 50; ++i) flat.observe(5, 1e-3);
  EXPECT_TRUE(flat.needs_variation());  // one row count only: b unknown, the prior's share
  EXPECT_NEAR(flat.per_row() / flat.fixed(), 0.2, 1e-12);
  EXPECT_NEAR(flat.fixed() + 5 * flat.per_row(), 1e-3, 1e-12);  // and the passes' mean cost
}

int total(const std::vector<int32_t>& k) { return std::accumulate(k.begin(), k.end(), 0); }

TEST(AllocateDrafts, FreeRowsTakeEveryDraftWithinTheBudget) {
  const std::vector<DraftOffer> offers{{4, 0.9}, {2, 0.5}, {0, 0.9}, {8, 0.1}};
  EXPECT_EQ(allocate_drafts(offers, 1.0, 0.0, 1000), (std::vector<int32_t>{4, 2, 0, 8}));
  // Ten rows in all: the requests' own four, then the six drafts with the largest gains
  // (0.9, 0.81, 0.729, 0.656 of the first; 0.5, 0.25 of the second).
  EXPECT_EQ(allocate_drafts(offers, 1.0, 0.0, 10), (std::vector<int32_t>{4, 2, 0, 0}));
  EXPECT_EQ(total(allocate_drafts(offers, 1.0, 0.0, 4)), 0);
}

TEST(AllocateDrafts, ComputeBoundBatchesDraftNothing) {
  // 16 requests whose rows cost as much as the whole fixed part: a draft accepted at 0.7 yields
  // 0.7 tokens for the price of a row that yields one.
  const std::vector<DraftOffer> offers(16, DraftOffer{4, 0.7});
  EXPECT_EQ(total(allocate_drafts(offers, 1.0, 1.0, 1000)), 0);
  // Batch 1, rows cheap next to streaming the weights: drafts pay.
  const std::vector<DraftOffer> one{{4, 0.7}};
  EXPECT_EQ(allocate_drafts(one, 1.0, 0.02, 1000), (std::vector<int32_t>{4}));
  // In between: a draft is added only while gain · cost > tokens · b.
  const auto k = allocate_drafts(std::vector<DraftOffer>(4, DraftOffer{8, 0.8}), 1.0, 0.1, 1000);
  double tokens = 4, cost = 1.0 + 0.4;
  for (int32_t ki : k) {
    double g = 1;
    for (int j = 0; j < ki; ++j) tokens += (g *= 0.8);
  }
  cost += 0.1 * total(k);
  // Neither one draft more nor one fewer would give more tokens per second.
  const double best = tokens / cost;
  EXPECT_GT(total(k), 0);
  EXPECT_LT(total(k), 32);
  const double next_gain = std::pow(0.8, *std::min_element(k.begin(), k.end()) + 1);
  EXPECT_LE((tokens + next_gain) / (cost + 0.1), best + 1e-12);
}

TEST(AllocateDrafts, ADraftMustBeatTheBatchsYieldByTheMargin) {
  // 8 requests, a = 1, b = 0.1: the plain pass yields 8 tokens for 1.8, 4.44 per unit; a draft
  // row costs 0.1, so it pays at all from an acceptance of 0.444, and clears the margin only from
  // 0.444 · kRequiredReturn (then every request's draft: each one lowers the batch's yield).
  const double average = 8.0 / 1.8, edge = average * 0.1;
  EXPECT_EQ(total(allocate_drafts(std::vector<DraftOffer>(8, DraftOffer{1, edge * 1.05}), 1.0, 0.1,
                                  1000)),
            0);
  EXPECT_EQ(total(allocate_drafts(
                std::vector<DraftOffer>(8, DraftOffer{1, edge * (kRequiredReturn + 0.05)}), 1.0,
                0.1, 1000)),
            8);
}

TEST(AllocateDrafts, HigherAcceptanceGetsTheRowsFirst) {
  const std::vector<DraftOffer> offers{{4, 0.2}, {4, 0.9}};
  const auto k = allocate_drafts(offers, 1.0, 0.0, 5);  // three draft rows to hand out
  EXPECT_EQ(k, (std::vector<int32_t>{0, 3}));
}

}  // namespace
}  // namespace rlt::spec
