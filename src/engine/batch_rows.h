// What the CPU and GPU runners both derive from a scheduled batch: that every item is a known
// request, and the rows a prefill runs — every item's chunk in order (loop-major prefill), or
// under the `shared` layout one wave per position offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "attention/metadata_planner.h"
#include "sched/scheduler.h"

namespace rlt::engine {

// An error naming the first item whose request the scheduler does not know.
inline Status check_batch_requests(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler) {
  for (const auto& item : batch.items) {
    if (scheduler.find(item.id) == nullptr) {
      return internal_error("batch names unknown request " + std::to_string(item.id));
    }
  }
  return {};
}

// Tokens and planned rows (depth 0) of every item's prompt chunk, item by item.
inline void collect_prefill_rows(const sched::SchedulerOutput& batch,
                                 const sched::Scheduler& scheduler, std::vector<int32_t>& tokens,
                                 std::vector<attention::PlannedRow>& rows) {
  tokens.clear();
  rows.clear();
  for (const auto& item : batch.items) {
    const sched::Request& r = *scheduler.find(item.id);
    for (int32_t p = item.token_start; p < item.token_start + item.token_count; ++p) {
      tokens.push_back(r.prompt[static_cast<size_t>(p)]);
      rows.push_back({item.id, 0, p});
    }
  }
}

// The longest chunk of the batch: the number of waves.
inline int32_t longest_chunk(const sched::SchedulerOutput& batch) {
  int32_t longest = 0;
  for (const auto& item : batch.items) longest = std::max(longest, item.token_count);
  return longest;
}

// Wave `offset`: position token_start + offset of every item whose chunk is that long.
inline void collect_wave_rows(const sched::SchedulerOutput& batch,
                              const sched::Scheduler& scheduler, int32_t offset,
                              std::vector<int32_t>& tokens,
                              std::vector<attention::PlannedRow>& rows) {
  tokens.clear();
  rows.clear();
  for (const auto& item : batch.items) {
    if (offset >= item.token_count) continue;
    const int32_t p = item.token_start + offset;
    tokens.push_back(scheduler.find(item.id)->prompt[static_cast<size_t>(p)]);
    rows.push_back({item.id, 0, p});
  }
}

// Whether planned row `row` is its request's last prompt position (its state is kept).
inline bool ends_prompt(const attention::PlannedRow& row, const sched::Scheduler& scheduler) {
  return row.position == scheduler.find(row.request)->prompt_len() - 1;
}

}  // namespace rlt::engine
