// Scheduling knobs, with the defaults the engine and CLI use (one source of truth).
#pragma once

#include <cstdint>
#include <string>

#include "rlt/status.h"

namespace rlt::sched {

enum class BatchMode : uint8_t {
  kRefill,    // a request leaving the loop is replaced at the next loop boundary (Continuous Depth Batching)
  kNoRefill,  // cohorts: a recurrent batch drains completely before new work joins
};
enum class QueuePolicy : uint8_t { kFcfs, kPriority };
enum class ExitMode : uint8_t { kOuro, kOuroDelayed, kTrace };

struct SchedulerConfig {
  int32_t max_num_seqs = 8;               // admitted requests, and rows per batch
  int32_t max_num_batched_tokens = 128;   // rows (tokens) per batch
  int32_t prefill_chunk_size = 128;       // prompt tokens per request per prefill batch
  int32_t max_prefill_batches_before_decode = 1;
  int32_t admission_scan_limit = 64;      // waiting requests looked at per admission pass
  int32_t max_admission_bypasses = 8;     // how often a deferred request may be overtaken
  BatchMode mode = BatchMode::kRefill;
  QueuePolicy policy = QueuePolicy::kFcfs;
  ExitMode exit_mode = ExitMode::kOuro;
  bool incremental_kv = true;             // allocate KV as tokens arrive (else the whole life up front)
  bool enable_preemption = false;
  int64_t preemption_host_bytes = int64_t{4} << 30;  // host memory for suspended requests' KV
  // The engine schedules batch N + 1 before batch N's results are back (one-step lookahead); needs
  // an exit mode whose decisions arrive a loop early (ouro_delayed, trace).
  bool async_scheduling = false;

  Status validate() const;
};

Result<BatchMode> parse_batch_mode(const std::string& s);      // "refill", "no_refill"
Result<QueuePolicy> parse_queue_policy(const std::string& s);  // "fcfs", "priority"
Result<ExitMode> parse_exit_mode(const std::string& s);        // "ouro", "ouro_delayed", "trace"

}  // namespace rlt::sched
