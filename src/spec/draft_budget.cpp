#include "spec/draft_budget.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace rlt::spec {
namespace {

constexpr double kAcceptanceMemory = 0.9;  // weight of the past per verify step
constexpr double kCostMemory = 0.97;       // weight of the past per observed pass
// Until rows have varied enough to measure it, a row is taken to cost this share of a pass's
// fixed part (measured: 0.15-0.25 for the bf16 Ouro-1.4B shape, about 1 for SmolLM2-135M Q4_1 on
// two cores, where the passes are compute-bound already); the fit replaces it within a few passes.
constexpr double kPriorRowShare = 0.2;

}  // namespace

void AcceptanceEstimate::observe(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  // Trials: every accepted draft, plus the rejected one that ended the run (if any).
  accepted_ = kAcceptanceMemory * accepted_ + accepted;
  trials_ = kAcceptanceMemory * trials_ + accepted + (accepted < drafted ? 1 : 0);
}

void AcceptanceEstimate::idle() {
  constexpr double kDrift = 0.9;  // about 20 steps without drafts bring a bad estimate back to drafting
  accepted_ = kDrift * accepted_ + (1 - kDrift) * kPriorAccepted;
  trials_ = kDrift * trials_ + (1 - kDrift) * kPriorTrials;
}

double AcceptanceEstimate::rate() const { return trials_ > 0 ? std::clamp(accepted_ / trials_, 0.0, 0.999) : 0.0; }

void VerifyCostModel::observe(int64_t rows, double seconds) {
  if (rows <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const auto r = static_cast<double>(rows);
  w_ = kCostMemory * w_ + 1;
  x_ = kCostMemory * x_ + r;
  y_ = kCostMemory * y_ + seconds;
  xx_ = kCostMemory * xx_ + r * r;
  xy_ = kCostMemory * xy_ + r * seconds;
  ++count_;
}

double VerifyCostModel::per_row() const {
  if (w_ <= 0) return kPriorRowShare;  // against fixed() = 1
  const double mx = x_ / w_, var = xx_ / w_ - mx * mx;
  if (needs_variation()) return kPriorRowShare * (y_ / w_) / (1 + kPriorRowShare * mx);
  const double cov = xy_ / w_ - mx * (y_ / w_);
  return std::max(0.0, cov / var);
}

double VerifyCostModel::fixed() const {
  if (w_ <= 0) return 1.0;  // any positive unit: only the ratio to per_row() matters
  const double a = y_ / w_ - per_row() * (x_ / w_);
  // A fit whose intercept went negative (noise) still means rows dominate: keep a small a.
  return std::max(a, 1e-3 * y_ / w_);
}

bool VerifyCostModel::needs_variation() const {
  if (w_ <= 0) return true;
  const double mx = x_ / w_, var = xx_ / w_ - mx * mx;
  // Rows spread by less than half a row: a and b cannot be told apart.
  return var < 0.25;
}

std::vector<int32_t> allocate_drafts(std::span<const DraftOffer> offers, double fixed, double per_row,
                                     int64_t row_budget) {
  std::vector<int32_t> k(offers.size(), 0);
  auto rows = static_cast<int64_t>(offers.size());
  double tokens = static_cast<double>(offers.size());
  double cost = fixed + per_row * static_cast<double>(rows);
  // (gain of the next draft, request): the next draft of request i is accepted with α_i^(k_i+1).
  std::priority_queue<std::pair<double, size_t>> next;
  for (size_t i = 0; i < offers.size(); ++i)
    if (offers[i].available > 0 && offers[i].acceptance > 0) next.push({offers[i].acceptance, i});
  while (!next.empty() && rows < row_budget) {
    const auto [gain, i] = next.top();
    // The draft's yield gain / b beats the batch's tokens / cost by the margin (without it, the
    // same as (tokens + gain) / (cost + b) > tokens / cost).
    if (gain * cost <= kRequiredReturn * tokens * per_row) break;
    next.pop();
    ++k[i];
    ++rows;
    tokens += gain;
    cost += per_row;
    if (k[i] < offers[i].available) next.push({gain * offers[i].acceptance, i});
  }
  return k;
}

}  // namespace rlt::spec
