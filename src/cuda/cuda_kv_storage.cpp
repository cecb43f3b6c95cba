#include "cuda/cuda_kv_storage.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "cuda/device.h"
#include "cuda/kv_copy.h"

namespace rlt::cuda {
namespace {

constexpr int32_t kCopyChunk = 4096;                // records per copy kernel launch
constexpr size_t kStagingBytes = size_t{16} << 20;  // pinned bytes per transfer chunk

Status check(cudaError_t e, const char* what) {
  return cuda_status(static_cast<int>(e), what);
}

// True when some record reads a slot another record writes, or two records write one slot
// (layers ignored: conservative, it only costs speed).
bool needs_ordering(std::span<const kv::SlotCopy> copies, int32_t block_size) {
  std::vector<int64_t> written;
  written.reserve(copies.size());
  for (const kv::SlotCopy& c : copies)
    written.push_back(int64_t{c.dst_block} * block_size + c.dst_slot);
  std::sort(written.begin(), written.end());
  if (std::adjacent_find(written.begin(), written.end()) != written.end()) return true;
  for (const kv::SlotCopy& c : copies) {
    if (std::binary_search(written.begin(), written.end(),
                           int64_t{c.src_block} * block_size + c.src_slot))
      return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<CudaKVStorage>> CudaKVStorage::create(const kv::KVGeometry& geometry,
                                                             StreamHandle stream) {
  int device = 0;
  RLT_RETURN_IF_ERROR(check(cudaGetDevice(&device), "reading the current device"));
  RLT_RETURN_IF_ERROR(geometry.validate());
  const auto block_bytes =
      static_cast<uint64_t>(geometry.block_elems()) * dtype_size(geometry.dtype);
  if (static_cast<uint64_t>(geometry.num_blocks) >
      std::numeric_limits<size_t>::max() / 2 / block_bytes) {
    return invalid_argument(fmt::format("KV pool of {} blocks x {} bytes overflows memory",
                                        geometry.num_blocks, block_bytes));
  }
  // One block more than the manager owns: the padding block (see padding_block()).
  const size_t bytes = static_cast<size_t>(geometry.num_blocks + 1) * block_bytes;
  RLT_ASSIGN_OR_RETURN(DeviceAllocation keys, DeviceAllocation::allocate(bytes, "the K cache"));
  RLT_ASSIGN_OR_RETURN(DeviceAllocation values, DeviceAllocation::allocate(bytes, "the V cache"));
  RLT_ASSIGN_OR_RETURN(
      DeviceAllocation list,
      DeviceAllocation::allocate(kCopyChunk * sizeof(DeviceSlotCopy), "KV copy records"));
  // Zeroed so a kernel that reads an unwritten slot by mistake sees zeros, not old data.
  RLT_RETURN_IF_ERROR(check(cudaMemsetAsync(keys.data(), 0, bytes, stream), "zeroing the K cache"));
  RLT_RETURN_IF_ERROR(
      check(cudaMemsetAsync(values.data(), 0, bytes, stream), "zeroing the V cache"));
  RLT_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "zeroing the KV cache"));
  return std::unique_ptr<CudaKVStorage>(new CudaKVStorage(geometry, device, stream, std::move(keys),
                                                          std::move(values), std::move(list)));
}

CudaKVStorage::CudaKVStorage(const kv::KVGeometry& geometry, int device, StreamHandle stream,
                             DeviceAllocation keys, DeviceAllocation values,
                             DeviceAllocation copy_list)
    : geometry_(geometry),
      device_(device),
      stream_(stream),
      keys_(std::move(keys)),
      values_(std::move(values)),
      copy_list_(std::move(copy_list)) {}

kv::PagedKVLayerView CudaKVStorage::layer_view(kv::KVPool pool, int32_t layer) const {
  const kv::KVGeometry& g = geometry_;
  kv::PagedKVLayerView v;
  auto* base = static_cast<std::byte*>(pool == kv::KVPool::kKey ? keys_.data() : values_.data());
  v.base = base + static_cast<size_t>(layer) * g.layer_elems() * dtype_size(g.dtype);
  v.block_stride = g.block_elems();
  v.token_stride = g.slot_units();
  v.head_stride = g.head_units();
  v.num_blocks = g.num_blocks + 1;  // the padding block is a valid id for kernels
  v.block_size = g.block_size;
  v.num_kv_heads = g.num_kv_heads;
  v.head_dim = g.head_dim;
  v.dtype = g.dtype;
  return v;
}

Status CudaKVStorage::copy_slots(std::span<const kv::SlotCopy> copies) {
  RLT_RETURN_IF_ERROR(set_device(device_));
  RLT_RETURN_IF_ERROR(kv::validate_slot_copies(geometry_, copies));
  if (copies.empty()) return {};
  const size_t elem = dtype_size(geometry_.dtype);
  KVPoolShape shape;
  shape.block_bytes = geometry_.block_elems() * static_cast<int64_t>(elem);
  shape.layer_bytes = geometry_.layer_elems() * static_cast<int64_t>(elem);
  shape.slot_bytes = geometry_.slot_units() * static_cast<int64_t>(elem);
  // The manager's plans never chain (no source is another record's destination) and never write
  // one slot twice, so their records run in parallel. Any other plan is applied record by record,
  // in order, exactly as the host storage does.
  const bool ordered = needs_ordering(copies, geometry_.block_size);
  for (size_t start = 0; start < copies.size(); start += kCopyChunk) {
    const auto count = static_cast<int32_t>(std::min<size_t>(kCopyChunk, copies.size() - start));
    // Staging buffers are reused round robin: this one's previous upload must have landed
    // (usually long ago: several calls have passed since).
    CopyStaging& staging = copy_staging_[next_copy_staging_];
    next_copy_staging_ = (next_copy_staging_ + 1) % copy_staging_.size();
    if (staging.used) {
      RLT_RETURN_IF_ERROR(staging.landed.synchronize());
    } else {
      RLT_ASSIGN_OR_RETURN(staging.landed, Event::create(/*timing=*/false));
    }
    RLT_RETURN_IF_ERROR(staging.buffer.reserve(kCopyChunk * sizeof(DeviceSlotCopy)));
    auto* records = reinterpret_cast<DeviceSlotCopy*>(staging.buffer.data());
    for (int32_t i = 0; i < count; ++i) {
      const kv::SlotCopy& c = copies[start + static_cast<size_t>(i)];
      records[i] = {c.src_block, c.src_slot, c.dst_block, c.dst_slot, c.layer_begin, c.layer_end};
    }
    RLT_RETURN_IF_ERROR(
        check(cudaMemcpyAsync(copy_list_.data(), records, count * sizeof(DeviceSlotCopy),
                              cudaMemcpyHostToDevice, stream_),
              "uploading KV slot copies"));
    RLT_RETURN_IF_ERROR(staging.landed.record(stream_));
    staging.used = true;
    const auto* device_records = static_cast<const DeviceSlotCopy*>(copy_list_.data());
    if (!ordered) {
      RLT_RETURN_IF_ERROR(launch_kv_copy_slots(device_records, count, keys_.data(), values_.data(),
                                               shape, stream_));
    } else {
      for (int32_t i = 0; i < count; ++i) {
        RLT_RETURN_IF_ERROR(launch_kv_copy_slots(device_records + i, 1, keys_.data(),
                                                 values_.data(), shape, stream_));
      }
    }
  }
  // Queued behind the work before it and ahead of the work after it on the same stream: the
  // copies see the K/V earlier passes write, later passes see the copies.
  return {};
}

Status CudaKVStorage::transfer(std::span<const kv::BlockId> blocks, std::byte* keys_host,
                               std::byte* values_host, const std::byte* keys_src,
                               const std::byte* values_src, bool to_host) const {
  const size_t block_bytes =
      static_cast<size_t>(geometry_.block_elems()) * dtype_size(geometry_.dtype);
  const size_t per_chunk = std::max<size_t>(1, kStagingBytes / (2 * block_bytes));
  RLT_RETURN_IF_ERROR(staging_.reserve(2 * per_chunk * block_bytes));
  std::byte* stage_k = staging_.data();
  std::byte* stage_v = staging_.data() + per_chunk * block_bytes;
  auto* dev_k = static_cast<std::byte*>(keys_.data());
  auto* dev_v = static_cast<std::byte*>(values_.data());
  const char* what = to_host ? "reading KV blocks" : "writing KV blocks";
  for (size_t start = 0; start < blocks.size(); start += per_chunk) {
    const size_t n = std::min(per_chunk, blocks.size() - start);
    if (!to_host) {
      std::memcpy(stage_k, keys_src + start * block_bytes, n * block_bytes);
      std::memcpy(stage_v, values_src + start * block_bytes, n * block_bytes);
    }
    auto queue_copies = [&]() -> Status {
      for (size_t i = 0; i < n; ++i) {
        const size_t off = static_cast<size_t>(blocks[start + i]) * block_bytes;
        const size_t staged = i * block_bytes;
        for (auto [device, stage] : {std::pair{dev_k, stage_k}, std::pair{dev_v, stage_v}}) {
          RLT_RETURN_IF_ERROR(check(to_host
                                        ? cudaMemcpyAsync(stage + staged, device + off, block_bytes,
                                                          cudaMemcpyDeviceToHost, stream_)
                                        : cudaMemcpyAsync(device + off, stage + staged, block_bytes,
                                                          cudaMemcpyHostToDevice, stream_),
                                    what));
        }
      }
      return {};
    };
    // Even when queueing failed halfway, the copies already queued must finish before the
    // staging buffer is written again (by the next transfer).
    const Status queued = queue_copies();
    const Status finished = check(cudaStreamSynchronize(stream_), what);
    RLT_RETURN_IF_ERROR(queued);
    RLT_RETURN_IF_ERROR(finished);
    if (to_host) {
      std::memcpy(keys_host + start * block_bytes, stage_k, n * block_bytes);
      std::memcpy(values_host + start * block_bytes, stage_v, n * block_bytes);
    }
  }
  return {};
}

Status CudaKVStorage::read_blocks(std::span<const kv::BlockId> blocks, std::span<std::byte> keys,
                                  std::span<std::byte> values) const {
  RLT_RETURN_IF_ERROR(
      kv::validate_block_transfer(geometry_, blocks, keys.size(), values.size(), "reading"));
  RLT_RETURN_IF_ERROR(set_device(device_));
  return transfer(blocks, keys.data(), values.data(), nullptr, nullptr, /*to_host=*/true);
}

Status CudaKVStorage::write_blocks(std::span<const kv::BlockId> blocks,
                                   std::span<const std::byte> keys,
                                   std::span<const std::byte> values) {
  RLT_RETURN_IF_ERROR(
      kv::validate_block_transfer(geometry_, blocks, keys.size(), values.size(), "writing"));
  RLT_RETURN_IF_ERROR(set_device(device_));
  return transfer(blocks, nullptr, nullptr, keys.data(), values.data(), /*to_host=*/false);
}

}  // namespace rlt::cuda
