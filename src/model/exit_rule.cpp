#include "model/exit_rule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"

namespace rlt::model {

Result<ExitParams> resolve_exit_params(ExitParams p, int64_t total_loops) {
  if (p.max_loops == 0) p.max_loops = total_loops;
  if (p.max_loops < 1 || p.max_loops > total_loops) {
    return invalid_argument(fmt::format("max_loops must be in [1, {}] (the model's total_ut_steps), got {}",
                                        total_loops, p.max_loops));
  }
  // The default min_loops (2) cannot exceed a shallower model's depth.
  if (p.min_loops > p.max_loops && p.min_loops == ExitParams{}.min_loops) p.min_loops = p.max_loops;
  if (p.min_loops < 1 || p.min_loops > p.max_loops) {
    return invalid_argument(fmt::format("min_loops must be in [1, max_loops={}], got {}", p.max_loops,
                                        p.min_loops));
  }
  if (!(p.threshold >= 0.0 && p.threshold <= 1.0)) {
    return invalid_argument(fmt::format("exit_threshold must be in [0, 1], got {}", p.threshold));
  }
  if (!p.criterion_threshold) p.criterion_threshold = default_criterion_threshold(p.criterion);
  if (!(*p.criterion_threshold >= 0.0) || !std::isfinite(*p.criterion_threshold)) {
    return invalid_argument(fmt::format("the {} exit criterion's threshold must be a finite number >= 0, got {}",
                                        rlt::name(p.criterion), *p.criterion_threshold));
  }
  return p;
}

bool ouro_exit_step(const ExitParams& p, int64_t loops_done, float gate_logit, double* remaining) {
  const float hazard = kernels::sigmoid(gate_logit);
  *remaining *= 1.0 - static_cast<double>(hazard);
  if (loops_done >= p.max_loops) return true;
  return p.threshold < 1.0 && loops_done >= p.min_loops && 1.0 - *remaining >= p.threshold;
}

bool criterion_exit_step(const ExitParams& p, int64_t loops_done, double value) {
  if (loops_done >= p.max_loops) return true;
  return loops_done >= p.min_loops && criterion_fires(p.criterion, value, p.criterion_threshold.value_or(0.0));
}

bool OuroExitAccumulator::update(int64_t loops_done, float gate_logit) {
  return ouro_exit_step(params_, loops_done, gate_logit, &remaining_);
}

int64_t ouro_exit_depth(const float* hazards, int64_t n, const ExitParams& resolved) {
  double remaining = 1.0;
  for (int64_t r = 1; r <= n; ++r) {
    remaining *= 1.0 - static_cast<double>(hazards[r - 1]);
    if (r >= resolved.max_loops) return r;
    if (resolved.threshold < 1.0 && r >= resolved.min_loops && 1.0 - remaining >= resolved.threshold)
      return r;
  }
  return std::min(n, resolved.max_loops);
}

}  // namespace rlt::model
