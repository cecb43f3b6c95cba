// When a looped model's token stops looping. Ouro and Nanbeige: the `gate` rule (exit_rule.h;
// no gate, no early exit). Huginn: the per-token criteria of its official adaptive generation,
// checked after every recurrence step of a generated token (the prompt runs every step):
//
//   latent-diff       ‖s_t − s_{t−1}‖ / ‖s_t‖ < thr, s_0 the initial state          (0.03)
//   entropy-diff      |H(p_t) − H(p_{t−1})| < thr, H = −Σ p ln(p + 1e-10), H_0 = 100 (1e-3)
//   kl                KL(p_{t−1} ‖ p_t) < thr, p_0 uniform                          (5e-4)
//   minp-kl           the same on min-p masked distributions: probabilities below
//                     0.1·max set to 1/V, renormalized                              (1e-6)
//   argmax-stability  the argmax equal to the previous step's `thr` times in a row  (5)
//   none              every step
//
// p_t = softmax of the logits read out from s_t (Huginn's coda, at every step: every criterion
// but latent-diff and none needs them). Values are computed in double from the f32 logits.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::model {

using ExitCriterion = rlt::ExitCriterion;

// (Names: rlt::name / rlt::parse_exit_criterion, rlt/config.h.)
// The official code's default threshold (the gate's is exit_threshold's business: 0).
double default_criterion_threshold(ExitCriterion c);
bool criterion_needs_logits(ExitCriterion c);
// Whether `value` (CriterionState::last_value) stops the token: below the threshold, or for
// argmax-stability at least the threshold; never for none and gate.
bool criterion_fires(ExitCriterion c, double value, double threshold);

// One generated token's test, fed each step's state and (where needed) logits.
class CriterionState {
 public:
  CriterionState(ExitCriterion criterion, double threshold, std::span<const float> initial_state,
                 int64_t vocab);

  // Feeds this step and returns its value (criterion_fires decides); `logits` may be empty
  // unless criterion_needs_logits.
  double step(std::span<const float> state, std::span<const float> logits);
  // step(), then whether the criterion fires.
  bool check(std::span<const float> state, std::span<const float> logits) {
    return criterion_fires(criterion_, step(state, logits), threshold_);
  }
  // The value the last check compared with the threshold (the streak for argmax-stability).
  double last_value() const { return last_value_; }

 private:
  ExitCriterion criterion_;
  double threshold_;
  std::vector<float> prev_state_;
  std::vector<double> prev_logp_;  // KL criteria: the previous step's log-probabilities
  std::vector<double> logp_;
  double prev_entropy_ = 100.0;
  int64_t prev_argmax_ = -1;
  int64_t streak_ = 0;
  double last_value_ = 0.0;
};

}  // namespace rlt::model
