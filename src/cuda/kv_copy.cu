#include <cuda_runtime.h>

#include "cuda/device.h"
#include "cuda/kv_copy.h"

namespace rlt::cuda {
namespace {

// One block per record; threads stride over the slot's 16-byte words (or bytes when the slot
// size or pool alignment does not allow words), layer by layer, for K then V.
__global__ void kv_copy_slots_kernel(const DeviceSlotCopy* __restrict__ copies, unsigned char* keys,
                                     unsigned char* values, KVPoolShape shape, bool wide) {
  const DeviceSlotCopy c = copies[blockIdx.x];
  for (int32_t layer = c.layer_begin; layer < c.layer_end; ++layer) {
    const int64_t src =
        c.src_block * shape.block_bytes + layer * shape.layer_bytes + c.src_slot * shape.slot_bytes;
    const int64_t dst =
        c.dst_block * shape.block_bytes + layer * shape.layer_bytes + c.dst_slot * shape.slot_bytes;
    for (int which = 0; which < 2; ++which) {
      unsigned char* pool = which == 0 ? keys : values;
      if (wide) {
        const uint4* s = reinterpret_cast<const uint4*>(pool + src);
        uint4* d = reinterpret_cast<uint4*>(pool + dst);
        for (int64_t i = threadIdx.x; i < shape.slot_bytes / 16; i += blockDim.x) d[i] = s[i];
      } else {
        for (int64_t i = threadIdx.x; i < shape.slot_bytes; i += blockDim.x)
          pool[dst + i] = pool[src + i];
      }
    }
  }
}

}  // namespace

Status launch_kv_copy_slots(const DeviceSlotCopy* copies, int32_t count, void* keys, void* values,
                            const KVPoolShape& shape, CUstream_st* stream) {
  if (count <= 0) return {};
  const bool wide =
      shape.slot_bytes % 16 == 0 && shape.layer_bytes % 16 == 0 && shape.block_bytes % 16 == 0;
  (void)cudaGetLastError();  // the check below is for this launch only
  kv_copy_slots_kernel<<<static_cast<unsigned>(count), 128, 0, stream>>>(
      copies, static_cast<unsigned char*>(keys), static_cast<unsigned char*>(values), shape, wide);
  return cuda_status(static_cast<int>(cudaGetLastError()), "KV slot copy launch");
}

}  // namespace rlt::cuda
