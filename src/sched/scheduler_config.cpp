#include "sched/scheduler_config.h"

#include <fmt/format.h>

namespace rlt::sched {

Status SchedulerConfig::validate() const {
  const std::pair<const char*, int64_t> positive[] = {
      {"max_num_seqs", max_num_seqs}, {"max_num_batched_tokens", max_num_batched_tokens},
      {"prefill_chunk_size", prefill_chunk_size}, {"max_prefill_batches_before_decode", max_prefill_batches_before_decode},
      {"admission_scan_limit", admission_scan_limit}, {"max_admission_bypasses", max_admission_bypasses}};
  for (const auto& [name, v] : positive)
    if (v < 1) return invalid_argument(fmt::format("{} must be at least 1, got {}", name, v));
  if (preemption_host_bytes < 0) return invalid_argument("preemption_host_bytes must not be negative");
  if (async_scheduling && exit_mode == ExitMode::kOuro) {
    return invalid_argument("asynchronous scheduling decides whether a token runs another loop before that loop's "
                            "exit signal is back, so it needs a delayed exit policy: use --exit-policy ouro_delayed "
                            "(or trace), or drop --async-scheduling");
  }
  return speculative.validate();
}

}  // namespace rlt::sched
