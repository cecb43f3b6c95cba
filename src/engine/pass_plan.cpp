#include "engine/pass_plan.h"

#include <fmt/format.h>

namespace rlt::engine {

Status plan_model_pass(std::span<const attention::PlannedRow> rows, std::span<const int32_t> depths,
                       const kv::KVCacheManager& kv, bool packed, attention::AttentionPlan& plan,
                       PassWrites& writes) {
  Status lookup_error;
  const attention::TableSource tables = [&](uint64_t request,
                                            int32_t depth) -> std::span<const int32_t> {
    auto t = kv.block_table(request, depth);
    if (!t.ok()) {
      if (lookup_error.ok()) lookup_error = t.status();
      return {};
    }
    return *t;
  };
  const attention::PlannerOptions options{kv.block_size(), packed, -1};
  Status s = depths.empty() ? attention::plan_attention(rows, tables, options, plan)
                            : attention::plan_attention_depths(rows, depths, tables, options, plan);
  if (!lookup_error.ok()) return lookup_error;
  RLT_RETURN_IF_ERROR(s);
  const int32_t bs = kv.block_size();
  const size_t passes = depths.empty() ? 1 : depths.size();
  writes.block.resize(passes * rows.size());
  writes.slot.resize(rows.size());
  for (size_t d = 0; d < passes; ++d) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int32_t depth = depths.empty() ? rows[i].depth : depths[d];
      RLT_ASSIGN_OR_RETURN(auto table, kv.block_table(rows[i].request, depth));
      const int32_t page = rows[i].position / bs;
      if (page >= static_cast<int32_t>(table.size())) {
        return failed_precondition(fmt::format("request {} has no page for position {} at depth {}",
                                               rows[i].request, rows[i].position, depth));
      }
      writes.block[d * rows.size() + i] = table[page];
      writes.slot[i] = rows[i].position % bs;
    }
  }
  return {};
}

}  // namespace rlt::engine
