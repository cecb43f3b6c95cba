// KV pools in host memory: the storage the CPU runner and the tests use. Two zero-initialized,
// 64-byte aligned buffers (K, V), each [num_blocks, num_layers, block_size, num_kv_heads,
// head_dim] in the model dtype. Not thread-safe; views stay valid for the storage's lifetime.
#pragma once

#include <cstddef>
#include <memory>

#include "kv/kv_storage.h"
#include "kv/layer_view.h"
#include "rlt/status.h"

namespace rlt::kv {

enum class KVPool : uint8_t { kKey, kValue };

class CpuKVStorage final : public KVStorage {
 public:
  // Errors: invalid geometry; a pool larger than the address space allows.
  static Result<std::unique_ptr<CpuKVStorage>> create(const KVGeometry& geometry);

  const KVGeometry& geometry() const override { return geometry_; }
  Status copy_slots(std::span<const SlotCopy> copies) override;
  Status read_blocks(std::span<const BlockId> blocks, std::span<std::byte> keys,
                     std::span<std::byte> values) const override;
  Status write_blocks(std::span<const BlockId> blocks, std::span<const std::byte> keys,
                      std::span<const std::byte> values) override;

  // Per-layer descriptor for attention; precondition 0 <= layer < num_layers.
  PagedKVLayerView layer_view(KVPool pool, int32_t layer) const;
  // Start of (block, layer, slot) in `pool`: num_kv_heads * head_dim elements follow.
  // Precondition: indices in range (this is the runner's write path, validated by its caller).
  std::byte* slot_data(KVPool pool, BlockId block, int32_t layer, int32_t slot);
  const std::byte* slot_data(KVPool pool, BlockId block, int32_t layer, int32_t slot) const;
  size_t pool_bytes() const { return pool_bytes_; }

 private:
  using Buffer = std::shared_ptr<void>;  // common/page_buffer.h

  CpuKVStorage(const KVGeometry& geometry, Buffer keys, Buffer values, size_t pool_bytes);
  std::byte* pool_data(KVPool pool) const {
    return static_cast<std::byte*>(pool == KVPool::kKey ? keys_.get() : values_.get());
  }

  KVGeometry geometry_;
  Buffer keys_;
  Buffer values_;
  size_t pool_bytes_;
  size_t elem_size_;
};

}  // namespace rlt::kv
