// KV pools in device memory: the storage the CUDA runner and attention backends read. Same
// layout and contract as kv::CpuKVStorage (kv/kv_storage.h): K and V, each [num_blocks,
// num_layers, block_size, num_kv_heads, head_dim] in the geometry's dtype, zero-initialized,
// plus one padding block at the end for CUDA-graph padding rows.
// Slot copies run as one kernel on the storage's stream and return once queued (stream order is
// what makes them see earlier passes' K/V); block reads and writes (snapshots for preemption,
// transfers) go through a pinned staging buffer and return once their host-visible effect is
// complete.
#pragma once

#include <array>
#include <memory>

#include "cuda/runtime.h"
#include "kv/cpu_kv_storage.h"
#include "kv/kv_storage.h"
#include "kv/layer_view.h"

namespace rlt::cuda {

class CudaKVStorage final : public kv::KVStorage {
 public:
  // Errors: invalid geometry; not enough device memory (with the sizes involved).
  static Result<std::unique_ptr<CudaKVStorage>> create(const kv::KVGeometry& geometry,
                                                       StreamHandle stream);

  const kv::KVGeometry& geometry() const override { return geometry_; }
  Status copy_slots(std::span<const kv::SlotCopy> copies) override;
  Status read_blocks(std::span<const kv::BlockId> blocks, std::span<std::byte> keys,
                     std::span<std::byte> values) const override;
  Status write_blocks(std::span<const kv::BlockId> blocks, std::span<const std::byte> keys,
                      std::span<const std::byte> values) override;

  // Device-memory descriptor of one layer for attention kernels; 0 <= layer < num_layers. Its
  // num_blocks counts the padding block too.
  kv::PagedKVLayerView layer_view(kv::KVPool pool, int32_t layer) const;
  // A block past the manager's ids that padding rows of a CUDA-graph bucket read and write, so
  // they never touch a request's pages. Never handed out, read or written through KVStorage.
  kv::BlockId padding_block() const { return geometry_.num_blocks; }
  size_t pool_bytes() const { return keys_.bytes(); }
  StreamHandle stream() const { return stream_; }

 private:
  CudaKVStorage(const kv::KVGeometry& geometry, int device, StreamHandle stream,
                DeviceAllocation keys, DeviceAllocation values, DeviceAllocation copy_list);
  // Copies whole blocks between the pools and host buffers, chunk by chunk through staging.
  Status transfer(std::span<const kv::BlockId> blocks, std::byte* keys_host, std::byte* values_host,
                  const std::byte* keys_src, const std::byte* values_src, bool to_host) const;

  kv::KVGeometry geometry_;
  int device_ = 0;  // the current device at creation; made current again by every call
  StreamHandle stream_;
  DeviceAllocation keys_, values_;
  DeviceAllocation copy_list_;  // device records for one copy_slots chunk
  mutable PinnedBuffer staging_;
  // Pinned staging for copy_slots' records, used round robin; each one's event is recorded after
  // its upload, and the host rewrites a buffer only once that upload landed.
  struct CopyStaging {
    PinnedBuffer buffer;
    Event landed;
    bool used = false;
  };
  std::array<CopyStaging, 4> copy_staging_;
  size_t next_copy_staging_ = 0;
};

}  // namespace rlt::cuda
