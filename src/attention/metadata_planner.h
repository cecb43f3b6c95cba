// The host metadata planner: a pure function from the rows of one model pass to what attention
// needs (depth-selected page tables padded to the batch width, causal context lengths and, for
// packed prefill, the query grouping). Planned once per pass and reused by every layer. Rows of
// several depths that share positions (a prefill chunk run through every loop) are planned once:
// lengths and grouping are computed a single time and only the page tables differ per depth.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "attention/contract.h"
#include "rlt/status.h"

namespace rlt::attention {

// One query row of a pass: which request, which depth plane it reads, at which position.
struct PlannedRow {
  uint64_t request = 0;
  int32_t depth = 0;
  int32_t position = 0;
};

// The block table of (request, depth plane), e.g. from the KV manager's plane_block_tables view.
using TableSource = std::function<std::span<const int32_t>(uint64_t request, int32_t depth)>;

struct PlannerOptions {
  int32_t block_size = 16;
  bool packed = false;     // group contiguous rows of one (request, depth) into one sequence
  int32_t pad_value = -1;  // table padding; backends never read it
};

// What every depth of a pass shares, plus one padded table set per depth planned.
struct AttentionPlan {
  int64_t rows = 0;
  int64_t num_seqs = 0;
  int32_t table_width = 0;
  int32_t max_seqlen_q = 1;
  bool packed = false;
  std::vector<int32_t> context_lengths;   // [num_seqs]
  std::vector<int32_t> cu_seqlens_q;      // [num_seqs + 1] when packed, else empty
  std::vector<int32_t> depths;            // the depth of each table set below
  std::vector<std::vector<int32_t>> block_tables;  // per depth: [num_seqs, table_width]

  // Fills the metadata fields of `params` for table set `depth_index` (0 for a one-depth plan).
  void bind(AttentionParams& params, size_t depth_index = 0) const;
};

// Plans `rows`, each reading its own depth (a recurrent batch at mixed depths). Reuses `out`'s
// buffers, so steady state allocates nothing.
Status plan_attention(std::span<const PlannedRow> rows, const TableSource& tables,
                      const PlannerOptions& options, AttentionPlan& out);

// Plans the same rows once for each depth in `depths` (the rows' own depth field is ignored):
// lengths and grouping are computed once and shared; only the tables differ per depth.
Status plan_attention_depths(std::span<const PlannedRow> rows, std::span<const int32_t> depths,
                             const TableSource& tables, const PlannerOptions& options, AttentionPlan& out);

// Two plans used in turn, so the next pass can be planned while the current one is still read.
// (The CUDA runner backs them with pinned memory and non-blocking copies.)
class PlanStaging {
 public:
  AttentionPlan& next() {
    current_ ^= 1;
    return plans_[current_];
  }
  const AttentionPlan& current() const { return plans_[current_]; }

 private:
  AttentionPlan plans_[2];
  int current_ = 1;
};

}  // namespace rlt::attention
