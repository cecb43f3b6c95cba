#include "kv/kv_storage.h"

#include <fmt/format.h>

namespace rlt::kv {
namespace {

Status check_block(const KVGeometry& g, BlockId block) {
  if (block < 0 || block >= g.num_blocks) {
    return out_of_range(
        fmt::format("KV block {} outside the pool of {} blocks", block, g.num_blocks));
  }
  return {};
}

}  // namespace

Status validate_slot_copies(const KVGeometry& g, std::span<const SlotCopy> copies) {
  for (const SlotCopy& c : copies) {
    RLT_RETURN_IF_ERROR(check_block(g, c.src_block));
    RLT_RETURN_IF_ERROR(check_block(g, c.dst_block));
    if (c.src_slot < 0 || c.src_slot >= g.block_size || c.dst_slot < 0 ||
        c.dst_slot >= g.block_size) {
      return out_of_range(fmt::format("slot copy {} -> {} outside block of {} slots", c.src_slot,
                                      c.dst_slot, g.block_size));
    }
    if (c.layer_begin < 0 || c.layer_begin > c.layer_end || c.layer_end > g.num_layers) {
      return out_of_range(fmt::format("slot copy layers [{}, {}) outside [0, {})", c.layer_begin,
                                      c.layer_end, g.num_layers));
    }
  }
  return {};
}

Status validate_block_transfer(const KVGeometry& g, std::span<const BlockId> blocks,
                               size_t key_bytes, size_t value_bytes, const char* verb) {
  const size_t need = blocks.size() * static_cast<size_t>(g.block_elems()) * dtype_size(g.dtype);
  if (key_bytes != need || value_bytes != need) {
    return invalid_argument(fmt::format("{} {} KV blocks needs {} bytes per pool, got {} / {}",
                                        verb, blocks.size(), need, key_bytes, value_bytes));
  }
  for (BlockId b : blocks) RLT_RETURN_IF_ERROR(check_block(g, b));
  return {};
}

}  // namespace rlt::kv
