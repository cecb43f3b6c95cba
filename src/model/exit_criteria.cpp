#include "model/exit_criteria.h"

#include <algorithm>
#include <cmath>

namespace rlt::model {
namespace {

struct Default {
  ExitCriterion criterion;
  double threshold;
};

constexpr Default kDefaults[] = {
    {ExitCriterion::kLatentDiff, 0.03},
    {ExitCriterion::kEntropyDiff, 1e-3},
    {ExitCriterion::kKl, 5e-4},
    {ExitCriterion::kMinpKl, 1e-6},
    {ExitCriterion::kArgmaxStability, 5.0},
};

// log-softmax of f32 logits, in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_sum = std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i)
    out[i] = static_cast<double>(logits[i]) - max - log_sum;
}

}  // namespace

double default_criterion_threshold(ExitCriterion c) {
  for (const Default& d : kDefaults)
    if (d.criterion == c) return d.threshold;
  return 0.0;
}

bool criterion_needs_logits(ExitCriterion c) {
  return c == ExitCriterion::kEntropyDiff || c == ExitCriterion::kKl ||
         c == ExitCriterion::kMinpKl || c == ExitCriterion::kArgmaxStability;
}

bool criterion_fires(ExitCriterion c, double value, double threshold) {
  switch (c) {
    case ExitCriterion::kGate:
    case ExitCriterion::kNone:
      return false;
    case ExitCriterion::kArgmaxStability:
      return value >= threshold;
    default:
      return value < threshold;
  }
}

CriterionState::CriterionState(ExitCriterion criterion, double threshold,
                               std::span<const float> initial_state, int64_t vocab)
    : criterion_(criterion), threshold_(threshold) {
  if (criterion == ExitCriterion::kLatentDiff)
    prev_state_.assign(initial_state.begin(), initial_state.end());
  if (criterion == ExitCriterion::kKl || criterion == ExitCriterion::kMinpKl)
    prev_logp_.assign(static_cast<size_t>(vocab), -std::log(static_cast<double>(vocab)));
}

double CriterionState::step(std::span<const float> state, std::span<const float> logits) {
  switch (criterion_) {
    case ExitCriterion::kGate:
    case ExitCriterion::kNone:
      return last_value_ = 0.0;
    case ExitCriterion::kLatentDiff: {
      double diff = 0.0, norm = 0.0;
      for (size_t i = 0; i < state.size(); ++i) {
        const double d = static_cast<double>(state[i]) - prev_state_[i];
        diff += d * d;
        norm += static_cast<double>(state[i]) * state[i];
      }
      prev_state_.assign(state.begin(), state.end());
      return last_value_ = std::sqrt(diff) / std::sqrt(norm);
    }
    case ExitCriterion::kArgmaxStability: {
      const auto top =
          static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      streak_ = top == prev_argmax_ ? streak_ + 1 : 0;
      prev_argmax_ = top;
      return last_value_ = static_cast<double>(streak_);
    }
    case ExitCriterion::kEntropyDiff: {
      log_softmax(logits, logp_);
      double entropy = 0.0;
      for (double lp : logp_) {
        const double p = std::exp(lp);
        entropy -= p * std::log(p + 1e-10);
      }
      last_value_ = std::abs(entropy - prev_entropy_);
      prev_entropy_ = entropy;
      return last_value_;
    }
    case ExitCriterion::kKl:
    case ExitCriterion::kMinpKl: {
      log_softmax(logits, logp_);
      if (criterion_ == ExitCriterion::kMinpKl) {
        const double vocab = static_cast<double>(logp_.size());
        const double max_p = std::exp(*std::max_element(logp_.begin(), logp_.end()));
        double sum = 0.0;
        for (double& lp : logp_) {
          const double p = std::exp(lp);
          lp = p < 0.1 * max_p ? 1.0 / vocab : p;  // the probability, masked
          sum += lp;
        }
        for (double& lp : logp_) lp = std::log(lp / sum);
      }
      double kl = 0.0;
      for (size_t i = 0; i < logp_.size(); ++i)
        kl += std::exp(prev_logp_[i]) * (prev_logp_[i] - logp_[i]);
      std::swap(prev_logp_, logp_);
      return last_value_ = kl;
    }
  }
  return last_value_ = 0.0;
}

}  // namespace rlt::model
