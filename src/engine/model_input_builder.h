// Where the engine wires the scheduler and the KV manager to a runner: a scheduled batch becomes
// a self-contained runner::ModelInput — the rows' tokens taken from the requests, each pass's
// attention metadata and K/V write targets planned from the manager's block tables (once per
// pass, shared by every loop and layer of it). The only file besides engine.cpp that reads both.
#pragma once

#include <cstdint>

#include "kv/kv_cache_manager.h"
#include "kv/kv_types.h"
#include "rlt/status.h"
#include "runner/model_input.h"
#include "sched/scheduler.h"

namespace rlt::engine {

struct InputPlanning {
  kv::KVLayout layout = kv::KVLayout::kLastExited;
  // The backend groups a request's contiguous prefill rows into one sequence
  // (BackendCapabilities::packed_prefill).
  bool packed_prefill = false;
  int32_t loops = 1;  // the model's loop count: a prefill row runs all of them
  // Outer planes (kv::KVCacheConfig::outer_planes: Huginn's prelude and coda K/V at depths
  // loops .. loops + outer_planes - 1): every stage's rows come in a pass planned for them.
  int32_t outer_planes = 0;
};

// Fills `out` (cleared first) for `batch`. Sampling rows (CODA) are the engine's to add. Errors: an
// item whose request the scheduler does not know, a table lookup the manager refuses, a row whose
// position has no page.
Status build_model_input(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                         const kv::KVCacheManager& kv, const InputPlanning& how,
                         runner::ModelInput& out);

// The runner's stage for a scheduled batch's stage (an error for stages that never run).
Result<runner::Stage> runner_stage(sched::Stage stage);

}  // namespace rlt::engine
