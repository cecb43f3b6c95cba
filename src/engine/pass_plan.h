// One model pass over the paged KV cache, planned on the host for the CPU and GPU runners alike:
// the attention metadata (one table set per planned depth, attention/metadata_planner.h) and where
// each row writes its K/V — the page of its depth plane that holds its position.
#pragma once

#include <span>
#include <vector>

#include "attention/metadata_planner.h"
#include "common/status.h"
#include "kv/kv_cache_manager.h"

namespace rlt::engine {

struct PassWrites {
  std::vector<kv::BlockId> block;  // [passes][rows], flat: pass d, row i at d * rows + i
  std::vector<int32_t> slot;       // [rows]: the slot depends on the position only
};

// With `depths` empty, one pass in which each row reads and writes the plane of its own depth;
// otherwise one pass per entry of `depths` over the same rows. `packed` groups contiguous rows of
// one (request, depth) into sequences. Errors: a table lookup the manager refuses, a row whose
// position has no page.
Status plan_model_pass(std::span<const attention::PlannedRow> rows, std::span<const int32_t> depths,
                       const kv::KVCacheManager& kv, bool packed, attention::AttentionPlan& plan,
                       PassWrites& writes);

}  // namespace rlt::engine
