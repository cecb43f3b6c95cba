// The scheduler's configuration (the defaults are rlt/config.h's, defined there once).
#pragma once

#include <cstdint>
#include <string>

#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::sched {

// The engine configuration's names for these (rlt/config.h).
using BatchMode = rlt::BatchMode;
using QueuePolicy = rlt::QueuePolicy;
using ExitMode = rlt::ExitPolicy;

// Built by the engine from EngineConfig (after its device defaults); the defaults here are the
// CPU's (rlt/config.h), for tests and tools that make a scheduler directly.
struct SchedulerConfig {
  int32_t max_num_seqs = kCpuScheduling.max_num_seqs;  // admitted requests, and rows per batch
  int32_t max_num_batched_tokens =
      kCpuScheduling.max_num_batched_tokens;  // rows (tokens) per batch
  int32_t prefill_chunk_size =
      kCpuScheduling.prefill_chunk_size;  // prompt tokens per request per prefill batch
  int32_t max_prefill_batches_before_decode = kCpuScheduling.max_prefill_batches_before_decode;
  int32_t admission_scan_limit = kCpuScheduling.admission_scan_limit;
  int32_t max_admission_bypasses = kCpuScheduling.max_admission_bypasses;
  BatchMode mode = BatchMode::kRefill;
  QueuePolicy policy = QueuePolicy::kFcfs;
  ExitMode exit_mode = ExitMode::kOuro;
  bool incremental_kv = true;             // allocate KV as tokens arrive (else the whole life up front)
  bool enable_preemption = false;
  int64_t preemption_host_bytes = kCpuScheduling.preemption_host_bytes;
  // The engine schedules batch N + 1 before batch N's results are back (one-step lookahead); needs
  // an exit mode whose decisions arrive a loop early (ouro_delayed, trace).
  bool async_scheduling = false;
  // Speculative decoding: every request's default (a request's own field overrides it).
  SpeculativeConfig speculative;
  // A token's CODA (and attending PRELUDE) cost in loops (their weight bytes over one loop's):
  // what a self draft costs besides its draft_loops loops, for choosing how many drafts a cycle
  // makes.
  double coda_loops = 0.0;
  // Refill mode gathers tokens that left the loop before reading them out (choose_stage_refill):
  // the engine sets it for models whose CODA and PRELUDE attend and cost a loop or more (Huginn).
  bool gather_exited_tokens = false;

  Status validate() const;
};

}  // namespace rlt::sched
