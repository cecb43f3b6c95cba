#include "engine/model_input_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace rlt::engine {
namespace {

// Each row's write target at each of `loops` planned depths (`depth(d, row)`).
template <typename DepthOf>
Status plan_writes(const kv::KVCacheManager& kv, const runner::PassInput& pass, size_t loops, DepthOf depth_of,
                   runner::PassWrites& writes) {
  const int32_t bs = kv.block_size();
  const size_t rows = pass.rows.size();
  writes.block.resize(loops * rows);
  writes.slot.resize(rows);
  for (size_t d = 0; d < loops; ++d) {
    for (size_t i = 0; i < rows; ++i) {
      const attention::PlannedRow& row = pass.rows[i];
      const int32_t depth = depth_of(d, row);
      RLT_ASSIGN_OR_RETURN(auto table, kv.block_table(row.request, depth));
      const int32_t page = row.position / bs;
      if (page >= static_cast<int32_t>(table.size())) {
        return failed_precondition(fmt::format("request {} has no page for position {} at depth {}",
                                               row.request, row.position, depth));
      }
      writes.block[d * rows + i] = table[page];
      writes.slot[i] = row.position % bs;
    }
  }
  return {};
}

// Plans `pass.rows`: with `pass.depths` empty, one pass in which each row reads and writes the
// plane of its own depth; otherwise one table set per entry of `depths` over the same rows. With
// outer planes, also one table set per outer plane (depths loops + i).
Status plan_pass(const kv::KVCacheManager& kv, bool packed, const InputPlanning& how, runner::PassInput& pass) {
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
  Status s = pass.depths.empty()
                 ? attention::plan_attention(pass.rows, tables, options, pass.attention)
                 : attention::plan_attention_depths(pass.rows, pass.depths, tables, options,
                                                    pass.attention);
  if (!lookup_error.ok()) return lookup_error;
  RLT_RETURN_IF_ERROR(s);
  RLT_RETURN_IF_ERROR(plan_writes(kv, pass, pass.num_loops(), [&](size_t d, const attention::PlannedRow& row) {
    return pass.depths.empty() ? row.depth : pass.depths[d];
  }, pass.writes));
  if (how.outer_planes == 0) return {};
  std::vector<int32_t> outer(static_cast<size_t>(how.outer_planes));
  std::iota(outer.begin(), outer.end(), how.loops);
  // Packing differs per backend only for prompt chunks; the outer blocks read like their loops.
  RLT_RETURN_IF_ERROR(attention::plan_attention_depths(pass.rows, outer, tables, options, pass.outer_attention));
  if (!lookup_error.ok()) return lookup_error;
  return plan_writes(kv, pass, outer.size(), [&](size_t d, const attention::PlannedRow&) { return outer[d]; },
                     pass.outer_writes);
}

// Adds the prompt row at `position` of request `r` to `pass` (and marks it when it ends the
// prompt: its hidden state is the request's; or when it scores the prompt's next token).
void add_prompt_row(const sched::Request& r, int32_t position, runner::PassInput& pass) {
  const auto row = static_cast<int32_t>(pass.rows.size());
  if (position == r.prompt_len() - 1) pass.keep_state.push_back(row);
  if (r.params.prompt_logprobs && position + 1 < r.prompt_len())
    pass.scores.push_back({row, r.prompt[static_cast<size_t>(position + 1)], *r.params.prompt_logprobs});
  pass.tokens.push_back(r.prompt[static_cast<size_t>(position)]);
  pass.rows.push_back({r.id, 0, position});
  pass.seeds.push_back(r.seed);
}

void all_loops(int32_t loops, std::vector<int32_t>& depths) {
  depths.resize(static_cast<size_t>(loops));
  std::iota(depths.begin(), depths.end(), 0);
}

}  // namespace

Result<runner::Stage> runner_stage(sched::Stage stage) {
  switch (stage) {
    case sched::Stage::kPrefill:
      return runner::Stage::kPrefill;
    case sched::Stage::kPrelude:
      return runner::Stage::kPrelude;
    case sched::Stage::kRecurrent:
      return runner::Stage::kRecurrent;
    case sched::Stage::kCoda:
      return runner::Stage::kCoda;
    case sched::Stage::kVerify:
      return runner::Stage::kVerify;
    default:
      return internal_error(fmt::format("cannot execute a {} batch", sched::stage_name(stage)));
  }
}

Status build_model_input(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                         const kv::KVCacheManager& kv, const InputPlanning& how,
                         runner::ModelInput& out) {
  out.clear();
  out.seq = batch.seq;
  RLT_ASSIGN_OR_RETURN(out.stage, runner_stage(batch.stage));
  std::vector<const sched::Request*> requests;
  requests.reserve(batch.items.size());
  for (const auto& item : batch.items) {
    const sched::Request* r = scheduler.find(item.id);
    if (r == nullptr)
      return internal_error("batch names unknown request " + std::to_string(item.id));
    requests.push_back(r);
    out.requests.push_back(item.id);
  }
  switch (out.stage) {
    case runner::Stage::kPrefill:
      if (how.layout == kv::KVLayout::kShared) {
        // `shared` keeps one plane that every loop overwrites, so a position must finish all its
        // loops before the next position attends to it: one wave per position offset. (One plan
        // serves a wave's loops: every depth maps to that plane.)
        int32_t longest = 0;
        for (const auto& item : batch.items) longest = std::max(longest, item.token_count);
        for (int32_t offset = 0; offset < longest; ++offset) {
          runner::PassInput& pass = out.add_pass();
          for (size_t i = 0; i < batch.items.size(); ++i) {
            const auto& item = batch.items[i];
            if (offset < item.token_count)
              add_prompt_row(*requests[i], item.token_start + offset, pass);
          }
          all_loops(how.loops, pass.depths);
          RLT_RETURN_IF_ERROR(plan_pass(kv, /*packed=*/false, how, pass));
        }
      } else {
        // Loop-major: loop t of every chunk row needs only loop-t K/V, so chunks are exact.
        runner::PassInput& pass = out.add_pass();
        for (size_t i = 0; i < batch.items.size(); ++i) {
          const auto& item = batch.items[i];
          for (int32_t p = item.token_start; p < item.token_start + item.token_count; ++p)
            add_prompt_row(*requests[i], p, pass);
        }
        all_loops(how.loops, pass.depths);
        RLT_RETURN_IF_ERROR(plan_pass(kv, how.packed_prefill, how, pass));
      }
      return {};
    case runner::Stage::kPrelude:
      for (const sched::Request* r : requests) out.tokens.push_back(r->feed_token());
      if (how.outer_planes > 0) {
        // The prelude attends: one pass over the fed tokens' positions.
        runner::PassInput& pass = out.add_pass();
        for (const sched::Request* r : requests) {
          pass.tokens.push_back(r->feed_token());
          pass.rows.push_back({r->id, 0, r->feed_position()});
          pass.seeds.push_back(r->seed);
        }
        return plan_pass(kv, /*packed=*/false, how, pass);
      }
      return {};
    case runner::Stage::kVerify: {
      // As a prefill chunk: the rows of a request are consecutive positions, loop-major over
      // every loop (the scheduler refuses speculation under `shared` with more than one loop).
      runner::PassInput& pass = out.add_pass();
      for (size_t i = 0; i < batch.items.size(); ++i) {
        const sched::Request& r = *requests[i];
        const auto& item = batch.items[i];
        if (static_cast<int32_t>(r.spec.drafts.size()) != item.token_count - 1)
          return internal_error(fmt::format("request {}: a verification of {} rows holds {} drafts", r.id,
                                            item.token_count, r.spec.drafts.size()));
        for (int32_t j = 0; j < item.token_count; ++j) {
          pass.tokens.push_back(j == 0 ? r.output_tokens.back() : r.spec.drafts[static_cast<size_t>(j - 1)]);
          pass.rows.push_back({r.id, 0, item.token_start + j});
        }
      }
      all_loops(how.loops, pass.depths);
      return plan_pass(kv, how.packed_prefill, how, pass);
    }
    case runner::Stage::kRecurrent: {
      runner::PassInput& pass = out.add_pass();
      for (size_t i = 0; i < batch.items.size(); ++i) {
        const auto& item = batch.items[i];
        pass.rows.push_back({item.id, item.depth, item.position});
        if (how.outer_planes > 0) pass.criteria.push_back(requests[i]->exit.criterion);
      }
      return plan_pass(kv, /*packed=*/false, how, pass);
    }
    case runner::Stage::kCoda:
      if (how.outer_planes > 0) {
        // The readout attends (Huginn's coda): one pass over the requests' current positions.
        runner::PassInput& pass = out.add_pass();
        for (const sched::Request* r : requests) pass.rows.push_back({r->id, 0, r->feed_position()});
        return plan_pass(kv, /*packed=*/false, how, pass);
      }
      return {};
  }
  return {};
}

}  // namespace rlt::engine
