#include "attention/metadata_planner.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlt::attention {
namespace {

// Groups rows into sequences and fills the depth-independent fields. seq_first_row[s] is the row
// whose (request, depth) names the sequence's table; for packed chunks it is the chunk's last row.
Status plan_shape(std::span<const PlannedRow> rows, const PlannerOptions& opt, bool check_keys,
                  AttentionPlan& out, std::vector<int64_t>& seq_row) {
  out.rows = static_cast<int64_t>(rows.size());
  out.packed = opt.packed;
  out.context_lengths.clear();
  out.cu_seqlens_q.clear();
  seq_row.clear();
  out.max_seqlen_q = 1;
  if (opt.block_size <= 0) return invalid_argument(fmt::format("planner: block_size must be positive, got {}", opt.block_size));
  for (const PlannedRow& r : rows) {
    if (r.position < 0) return invalid_argument(fmt::format("planner: negative position {} for request {}", r.position, r.request));
  }
  if (!opt.packed) {
    for (size_t i = 0; i < rows.size(); ++i) {
      out.context_lengths.push_back(rows[i].position + 1);
      seq_row.push_back(static_cast<int64_t>(i));
    }
  } else {
    out.cu_seqlens_q.push_back(0);
    // (request, depth) of closed chunks; a linear scan beats a hash set at batch sizes and
    // keeps the planner allocation-free once warm.
    thread_local std::vector<std::pair<uint64_t, int32_t>> seen;
    seen.clear();
    size_t start = 0;
    for (size_t i = 1; i <= rows.size(); ++i) {
      const bool boundary = i == rows.size() || rows[i].request != rows[start].request ||
                            rows[i].depth != rows[start].depth;
      if (!boundary) {
        if (rows[i].position != rows[i - 1].position + 1) {
          return invalid_argument(fmt::format("planner: packed rows of request {} depth {} must have contiguous "
                                              "positions, got {} after {}", rows[i].request, rows[i].depth,
                                              rows[i].position, rows[i - 1].position));
        }
        continue;
      }
      const PlannedRow& last = rows[i - 1];
      const std::pair<uint64_t, int32_t> chunk_key{last.request, last.depth};
      if (check_keys && std::find(seen.begin(), seen.end(), chunk_key) != seen.end()) {
        return invalid_argument(fmt::format("planner: request {} depth {} appears in two separate runs; a packed "
                                            "(request, depth) must form one contiguous sequence", last.request, last.depth));
      }
      seen.push_back(chunk_key);
      out.context_lengths.push_back(last.position + 1);
      out.cu_seqlens_q.push_back(static_cast<int32_t>(i));
      out.max_seqlen_q = std::max(out.max_seqlen_q, static_cast<int32_t>(i - start));
      seq_row.push_back(static_cast<int64_t>(i - 1));
      start = i;
    }
  }
  out.num_seqs = static_cast<int64_t>(out.context_lengths.size());
  int32_t width = 0;
  for (int32_t len : out.context_lengths) width = std::max(width, (len + opt.block_size - 1) / opt.block_size);
  out.table_width = width;
  return {};
}

Status fill_tables(std::span<const PlannedRow> rows, const std::vector<int64_t>& seq_row, int32_t depth_override,
                   bool use_override, const TableSource& tables, const PlannerOptions& opt, const AttentionPlan& plan,
                   std::vector<int32_t>& dst) {
  dst.assign(static_cast<size_t>(plan.num_seqs * plan.table_width), opt.pad_value);
  for (int64_t s = 0; s < plan.num_seqs; ++s) {
    const PlannedRow& r = rows[static_cast<size_t>(seq_row[static_cast<size_t>(s)])];
    const int32_t depth = use_override ? depth_override : r.depth;
    const std::span<const int32_t> table = tables(r.request, depth);
    const int64_t needed = (plan.context_lengths[static_cast<size_t>(s)] + opt.block_size - 1) / opt.block_size;
    if (static_cast<int64_t>(table.size()) < needed) {
      return failed_precondition(fmt::format("planner: request {} depth {} has {} blocks but position {} needs {}",
                                             r.request, depth, table.size(), r.position, needed));
    }
    std::copy(table.begin(), table.begin() + needed, dst.begin() + s * plan.table_width);
  }
  return {};
}

}  // namespace

void AttentionPlan::bind(AttentionParams& params, size_t depth_index) const {
  params.rows = rows;
  params.num_seqs = num_seqs;
  params.table_width = table_width;
  params.block_tables = block_tables[depth_index].data();
  params.context_lengths = context_lengths.data();
  params.cu_seqlens_q = packed ? cu_seqlens_q.data() : nullptr;
  params.max_seqlen_q = max_seqlen_q;
}

Status plan_attention(std::span<const PlannedRow> rows, const TableSource& tables, const PlannerOptions& options,
                      AttentionPlan& out) {
  thread_local std::vector<int64_t> seq_row;
  RLT_RETURN_IF_ERROR(plan_shape(rows, options, /*check_keys=*/true, out, seq_row));
  out.depths.assign(1, rows.empty() ? 0 : rows.front().depth);
  out.block_tables.resize(1);
  return fill_tables(rows, seq_row, 0, false, tables, options, out, out.block_tables[0]);
}

Status plan_attention_depths(std::span<const PlannedRow> rows, std::span<const int32_t> depths,
                             const TableSource& tables, const PlannerOptions& options, AttentionPlan& out) {
  thread_local std::vector<int64_t> seq_row;
  RLT_RETURN_IF_ERROR(plan_shape(rows, options, /*check_keys=*/true, out, seq_row));
  out.depths.assign(depths.begin(), depths.end());
  out.block_tables.resize(depths.size());
  for (size_t i = 0; i < depths.size(); ++i) {
    RLT_RETURN_IF_ERROR(fill_tables(rows, seq_row, depths[i], true, tables, options, out, out.block_tables[i]));
  }
  return {};
}

}  // namespace rlt::attention
