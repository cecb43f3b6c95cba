#include "kv/cpu_kv_storage.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <utility>

#include "common/page_buffer.h"

namespace rlt::kv {

Result<std::unique_ptr<CpuKVStorage>> CpuKVStorage::create(const KVGeometry& geometry) {
  RLT_RETURN_IF_ERROR(geometry.validate());
  const size_t elem = dtype_size(geometry.dtype);
  const auto block_bytes = static_cast<uint64_t>(geometry.block_elems()) * elem;
  if (block_bytes != 0 && static_cast<uint64_t>(geometry.num_blocks) >
                              std::numeric_limits<size_t>::max() / 2 / block_bytes) {
    return invalid_argument(fmt::format("KV pool of {} blocks x {} bytes overflows memory",
                                        geometry.num_blocks, block_bytes));
  }
  const size_t bytes = static_cast<size_t>(geometry.num_blocks) * block_bytes;
  // Zeroed so a kernel that reads an unwritten slot by mistake sees zeros, not old secrets; from
  // the kernel's zero pages, so the pools cost memory only as requests fill them.
  Buffer keys = allocate_zeroed(bytes), values = allocate_zeroed(bytes);
  if (keys == nullptr || values == nullptr) {
    return resource_exhausted(fmt::format(
        "cannot allocate 2 x {} bytes of host KV cache ({} blocks)", bytes, geometry.num_blocks));
  }
  return std::unique_ptr<CpuKVStorage>(
      new CpuKVStorage(geometry, std::move(keys), std::move(values), bytes));
}

CpuKVStorage::CpuKVStorage(const KVGeometry& geometry, Buffer keys, Buffer values,
                           size_t pool_bytes)
    : geometry_(geometry),
      keys_(std::move(keys)),
      values_(std::move(values)),
      pool_bytes_(pool_bytes),
      elem_size_(dtype_size(geometry.dtype)) {}

PagedKVLayerView CpuKVStorage::layer_view(KVPool pool, int32_t layer) const {
  const KVGeometry& g = geometry_;
  PagedKVLayerView v;
  v.base = pool_data(pool) + static_cast<size_t>(layer) * g.layer_elems() * elem_size_;
  v.block_stride = g.block_elems();
  v.token_stride = g.slot_units();
  v.head_stride = g.head_units();
  v.num_blocks = g.num_blocks;
  v.block_size = g.block_size;
  v.num_kv_heads = g.num_kv_heads;
  v.head_dim = g.head_dim;
  v.dtype = g.dtype;
  return v;
}

std::byte* CpuKVStorage::slot_data(KVPool pool, BlockId block, int32_t layer, int32_t slot) {
  return const_cast<std::byte*>(std::as_const(*this).slot_data(pool, block, layer, slot));
}

const std::byte* CpuKVStorage::slot_data(KVPool pool, BlockId block, int32_t layer,
                                         int32_t slot) const {
  const KVGeometry& g = geometry_;
  size_t elems = static_cast<size_t>(block) * g.block_elems() +
                 static_cast<size_t>(layer) * g.layer_elems() +
                 static_cast<size_t>(slot) * g.slot_units();
  return pool_data(pool) + elems * elem_size_;
}

Status CpuKVStorage::copy_slots(std::span<const SlotCopy> copies) {
  const KVGeometry& g = geometry_;
  RLT_RETURN_IF_ERROR(validate_slot_copies(g, copies));
  const size_t slot_bytes = static_cast<size_t>(g.slot_units()) * elem_size_;
  for (const SlotCopy& c : copies) {
    for (int32_t layer = c.layer_begin; layer < c.layer_end; ++layer) {
      for (KVPool pool : {KVPool::kKey, KVPool::kValue}) {
        std::memmove(slot_data(pool, c.dst_block, layer, c.dst_slot),
                     slot_data(pool, c.src_block, layer, c.src_slot), slot_bytes);
      }
    }
  }
  return {};
}

Status CpuKVStorage::read_blocks(std::span<const BlockId> blocks, std::span<std::byte> keys,
                                 std::span<std::byte> values) const {
  const size_t block_bytes = static_cast<size_t>(geometry_.block_elems()) * elem_size_;
  RLT_RETURN_IF_ERROR(
      validate_block_transfer(geometry_, blocks, keys.size(), values.size(), "reading"));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const size_t off = static_cast<size_t>(blocks[i]) * block_bytes;
    std::memcpy(keys.data() + i * block_bytes, pool_data(KVPool::kKey) + off, block_bytes);
    std::memcpy(values.data() + i * block_bytes, pool_data(KVPool::kValue) + off, block_bytes);
  }
  return {};
}

Status CpuKVStorage::write_blocks(std::span<const BlockId> blocks, std::span<const std::byte> keys,
                                  std::span<const std::byte> values) {
  const size_t block_bytes = static_cast<size_t>(geometry_.block_elems()) * elem_size_;
  RLT_RETURN_IF_ERROR(
      validate_block_transfer(geometry_, blocks, keys.size(), values.size(), "writing"));
  for (size_t i = 0; i < blocks.size(); ++i) {
    const size_t off = static_cast<size_t>(blocks[i]) * block_bytes;
    std::memcpy(pool_data(KVPool::kKey) + off, keys.data() + i * block_bytes, block_bytes);
    std::memcpy(pool_data(KVPool::kValue) + off, values.data() + i * block_bytes, block_bytes);
  }
  return {};
}

}  // namespace rlt::kv
