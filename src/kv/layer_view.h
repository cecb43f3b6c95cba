// A plain descriptor of one layer of one paged KV pool (K or V), for attention kernels.
// Header-only and dependency-free (beyond DType) so the attention module can take it without
// linking kv. Element (block b, slot t, head h, dim i) lives at
//   base + b * block_stride + t * token_stride + h * head_stride + i      (in elements of dtype)
// i.e. token-major, then head, then dim ("NHD") within a page. block_stride spans every layer of
// a block, so consecutive blocks of one layer are not contiguous. Q8_0 counts bytes instead: a
// head (head_stride bytes from the one before) is head_dim / 32 GGML q8_0 blocks, each an f16
// scale and 32 int8 values (value i = scale * q[i]).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace rlt::kv {

// A GGML q8_0 block of the Q8_0 K/V encoding: an f16 scale, then 32 int8.
constexpr int64_t kQ8_0BlockValues = 32;
constexpr int64_t kQ8_0BlockBytes = 34;

struct PagedKVLayerView {
  void* base = nullptr;      // element (block 0, slot 0, head 0, dim 0) of this layer
  int64_t block_stride = 0;  // elements between the same slot of consecutive blocks
  int64_t token_stride = 0;  // elements between consecutive slots of a block
  int64_t head_stride = 0;   // elements between consecutive kv heads of a slot
  int32_t num_blocks = 0;    // valid block ids are [0, num_blocks)
  int32_t block_size = 0;    // slots per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;       // contiguous elements per head
  DType dtype = DType::kF32;  // F32, BF16, F16 (16-bit types stored as raw uint16_t) or Q8_0
};

}  // namespace rlt::kv
