// The device-storage contract. The manager owns pages logically; whoever owns the memory (the
// model runner: CPU pools, CUDA pools) implements this interface so the manager can plan copies
// and save or restore page contents without knowing where the bytes live.
//
// Memory: two pools, K and V, each [num_blocks, num_layers, block_size, num_kv_heads, head_dim]
// in geometry().dtype. Host buffers exchanged with read_blocks / write_blocks hold
// [blocks.size(), num_layers, block_size, num_kv_heads, head_dim] per pool, in `blocks` order.
// Implementations validate block ids and buffer sizes and report errors as Status (never abort).
// Not thread-safe; calls are ordered after every earlier write the caller issued.
#pragma once

#include <cstddef>
#include <span>

#include "kv/kv_types.h"
#include "rlt/status.h"

namespace rlt::kv {

class KVStorage {
 public:
  virtual ~KVStorage() = default;

  virtual const KVGeometry& geometry() const = 0;

  // Executes a finalize plan: each copy moves K and V of one token slot for layers
  // [layer_begin, layer_end). Copies are applied in order; a copy's source is never another
  // copy's destination within one plan produced by the manager.
  virtual Status copy_slots(std::span<const SlotCopy> copies) = 0;

  // Whole blocks (every layer, K and V) to host memory. `keys` and `values` must each hold
  // blocks.size() * geometry().block_elems() elements of the pool dtype.
  virtual Status read_blocks(std::span<const BlockId> blocks, std::span<std::byte> keys,
                             std::span<std::byte> values) const = 0;
  // The reverse of read_blocks.
  virtual Status write_blocks(std::span<const BlockId> blocks, std::span<const std::byte> keys,
                              std::span<const std::byte> values) = 0;
};

// The checks every storage runs before touching memory, so a bad record leaves the pools as
// they were. Block ids in range, slots inside a block, layers inside the geometry.
Status validate_slot_copies(const KVGeometry& geometry, std::span<const SlotCopy> copies);
// `verb` is "reading" or "writing"; each pool's host buffer must hold blocks.size() whole blocks.
Status validate_block_transfer(const KVGeometry& geometry, std::span<const BlockId> blocks, size_t key_bytes,
                               size_t value_bytes, const char* verb);

}  // namespace rlt::kv
