// The `ouro` early-exit rule (vllm-rlt semantics; docs/architecture.md "Early exit").
//
// After loop r (1-based) of a generated token, hazard λ_r = f32(sigmoid(f32(gate_logit))) and
// remaining *= (1 - λ_r), accumulated in float64. The token exits when r ≥ max_loops, or when
// threshold < 1 and r ≥ min_loops and 1 - remaining ≥ threshold. Prompt tokens always run all
// loops. Threshold 1 disables adaptive exit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/exit_criteria.h"
#include "rlt/status.h"

namespace rlt::model {

struct ExitParams {
  int64_t min_loops = 2;     // clamped to the model's loop count when the model has fewer
  int64_t max_loops = 0;     // 0 = the model's loop count (total_ut_steps)
  double threshold = 1.0;    // in [0, 1]; 1 disables adaptive exit
  // kGate: the rule above. Otherwise one of Huginn's criteria (exit_criteria.h), checked after
  // every loop from min_loops on, with `criterion_threshold` (unset: the criterion's default).
  ExitCriterion criterion = ExitCriterion::kGate;
  std::optional<double> criterion_threshold = std::nullopt;
};

// Fills defaults against the model's loop count and validates; errors name the field and the
// allowed range.
Result<ExitParams> resolve_exit_params(ExitParams p, int64_t total_loops);

// One step of the rule, for callers that keep the state themselves (the scheduler keeps it on
// each request): folds loop `loops_done`'s gate logit into `remaining` (Π(1 - λ), float64) and
// says whether the rule fires.
bool ouro_exit_step(const ExitParams& resolved, int64_t loops_done, float gate_logit, double* remaining);

// The same for a criterion's value after loop `loops_done` (exit_criteria.h): whether the token
// stops (at max_loops, or from min_loops on when the criterion fires).
bool criterion_exit_step(const ExitParams& resolved, int64_t loops_done, double value);

// Per-token state of the rule. Reset for every generated token.
class OuroExitAccumulator {
 public:
  explicit OuroExitAccumulator(const ExitParams& resolved) : params_(resolved) {}
  // Feeds the gate logit of loop `loops_done` (1-based) and says whether the token exits now.
  bool update(int64_t loops_done, float gate_logit);
  // 1 - Π(1 - λ): the cumulative exit probability so far.
  double exit_probability() const { return 1.0 - remaining_; }

 private:
  ExitParams params_;
  double remaining_ = 1.0;
};

// The 1-based exit depth for a whole vector of hazards (already f32), for tests and tools.
int64_t ouro_exit_depth(const float* hazards, int64_t n, const ExitParams& resolved);

}  // namespace rlt::model
