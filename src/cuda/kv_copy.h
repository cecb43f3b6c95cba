// Device kernels behind CudaKVStorage::copy_slots. Plain C++17 declarations (the .cu side
// compiles as C++17 and cannot see the C++20 kv headers).
#pragma once

#include <cstdint>

#include "rlt/status.h"

struct CUstream_st;

namespace rlt::cuda {

struct DeviceSlotCopy {
  int32_t src_block, src_slot, dst_block, dst_slot, layer_begin, layer_end;
};

// Geometry of one pool as the copy kernel needs it.
struct KVPoolShape {
  int64_t block_bytes = 0;  // every layer of one block
  int64_t layer_bytes = 0;  // one layer of one block
  int64_t slot_bytes = 0;   // num_kv_heads * head_dim * element size
};

// Copies K and V of each record (device array of `count` validated records) for its layers.
// Records never overlap source and destination within one call, so they run in parallel.
Status launch_kv_copy_slots(const DeviceSlotCopy* copies, int32_t count, void* keys, void* values,
                            const KVPoolShape& shape, CUstream_st* stream);

}  // namespace rlt::cuda
