#include "runner/model_input.h"

#include <fmt/format.h>

namespace rlt::runner {

std::string_view stage_name(Stage stage) {
  switch (stage) {
    case Stage::kPrefill:
      return "prefill";
    case Stage::kPrelude:
      return "prelude";
    case Stage::kRecurrent:
      return "recurrent";
    case Stage::kCoda:
      return "coda";
    case Stage::kVerify:
      return "verify";
  }
  return "unknown";
}

Status check_pass_writes(const PassInput& pass, int32_t num_blocks, int32_t block_size, int32_t outer_planes) {
  const size_t rows = pass.rows.size();
  if (outer_planes > 0) {
    if (pass.outer_writes.slot.size() != rows || pass.outer_writes.block.size() != rows * static_cast<size_t>(outer_planes) ||
        pass.outer_attention.block_tables.size() != static_cast<size_t>(outer_planes)) {
      return internal_error(fmt::format("a pass of {} rows over {} outer planes has {} outer write slots, {} outer "
                                        "write blocks and {} outer table sets",
                                        rows, outer_planes, pass.outer_writes.slot.size(),
                                        pass.outer_writes.block.size(), pass.outer_attention.block_tables.size()));
    }
    for (const kv::BlockId b : pass.outer_writes.block) {
      if (b < 0 || b >= num_blocks)
        return internal_error(fmt::format("a pass writes outer K/V to block {} of a pool of {}", b, num_blocks));
    }
  }
  if (pass.writes.slot.size() != rows || pass.writes.block.size() != rows * pass.num_loops() ||
      (!pass.tokens.empty() && pass.tokens.size() != rows)) {
    return internal_error(fmt::format(
        "a pass of {} rows and {} loops has {} write slots, {} write blocks and {} tokens", rows,
        pass.num_loops(), pass.writes.slot.size(), pass.writes.block.size(), pass.tokens.size()));
  }
  for (const kv::BlockId b : pass.writes.block) {
    if (b < 0 || b >= num_blocks)
      return internal_error(
          fmt::format("a pass writes K/V to block {} of a pool of {}", b, num_blocks));
  }
  for (const int32_t s : pass.writes.slot) {
    if (s < 0 || s >= block_size)
      return internal_error(
          fmt::format("a pass writes K/V to slot {} of blocks of {}", s, block_size));
  }
  for (const int32_t i : pass.keep_state) {
    if (i < 0 || static_cast<size_t>(i) >= rows)
      return internal_error(fmt::format("a pass keeps the state of row {} of {}", i, rows));
  }
  return {};
}

void ModelInput::clear() {
  seq = 0;
  stage = Stage::kPrefill;
  requests.clear();
  tokens.clear();
  // The passes keep their vectors' capacity: a steady state of batches allocates nothing.
  for (PassInput& pass : pass_pool_) {
    pass.tokens.clear();
    pass.rows.clear();
    pass.depths.clear();
    pass.keep_state.clear();
    pass.scores.clear();
    pass.outer_writes.block.clear();
    pass.outer_writes.slot.clear();
    pass.seeds.clear();
    pass.criteria.clear();
  }
  passes_used_ = 0;
  sampling.clear();
}

PassInput& ModelInput::add_pass() {
  if (passes_used_ == pass_pool_.size()) pass_pool_.emplace_back();
  return pass_pool_[passes_used_++];
}

}  // namespace rlt::runner
