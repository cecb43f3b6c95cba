// Vocabulary of the KV module: ids, layouts, pool geometry, manager configuration, page math and
// the finalize copy record. Everything here is plain data; see docs/kv-cache.md for the contracts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/dtype.h"
#include "kv/layer_view.h"
#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::kv {

// The scheduler's request id. Ids may be reused once a request's allocation is gone.
using RequestId = uint64_t;
// Identifies one transfer (PD disaggregation) holding a lease on an allocation.
using TransferId = uint64_t;
// A physical page (block) index into the K and V pools: [0, num_blocks).
using BlockId = int32_t;
using TokenId = int32_t;

// How loop depths map onto block tables ("planes"), as the engine's configuration names it
// (rlt/config.h). kLastExited: one plane per loop depth; a token executed at depth d writes plane
// d, and an early exit at e copies its depth-e K/V into planes e+1..R-1 so deeper queries read
// version min(d, e). kShared: one plane for all depths, overwritten each loop: historical tokens
// are seen at their final version at every depth (not a lossless compression of kLastExited:
// different attention inputs).
using KVLayout = rlt::KVLayout;

// Planes (block tables) a request holds: `depth` for kLastExited, 1 for kShared.
inline int32_t storage_planes(KVLayout layout, int32_t depth) {
  return layout == KVLayout::kLastExited ? depth : 1;
}

// Bytes of `values` K/V values (whole heads) stored in `dtype`: Q8_0 takes 34 per 32.
inline int64_t kv_value_bytes(DType dtype, int64_t values) {
  return dtype == DType::kQ8_0 ? values / kQ8_0BlockValues * kQ8_0BlockBytes
                               : values * static_cast<int64_t>(dtype_size(dtype));
}

// Physical shape of the K and V pools, each [num_blocks, num_layers, block_size, num_kv_heads,
// head_dim] in `dtype`. A block holds K (or V) for every layer of block_size token slots; depth
// exists only through the per-plane block tables. Sizes count units of dtype_size(dtype) bytes:
// elements of a float dtype, bytes of Q8_0, whose head of head_dim values is head_dim / 32 GGML
// q8_0 blocks of 34 bytes (head_units()).
struct KVGeometry {
  int32_t num_blocks = 0;
  int32_t num_layers = 0;
  int32_t block_size = 16;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::kBF16;

  // Units of one head of one slot: head_dim, or Q8_0's bytes.
  int64_t head_units() const {
    return kv_value_bytes(dtype, head_dim) / static_cast<int64_t>(dtype_size(dtype));
  }
  // Units of one slot (every head): num_kv_heads * head_units().
  int64_t slot_units() const { return int64_t{num_kv_heads} * head_units(); }
  // Units of one layer of one block: block_size * slot_units().
  int64_t layer_elems() const { return int64_t{block_size} * slot_units(); }
  // Units of one block of one pool (K or V): num_layers * layer_elems().
  int64_t block_elems() const { return int64_t{num_layers} * layer_elems(); }
  // Bytes one block id costs in K and V together: 2 * L * B * H_kv * head_units * unit size.
  int64_t bytes_per_block() const { return 2 * block_elems() * int64_t(dtype_size(dtype)); }
  // Every field positive, dtype one of f32/bf16/f16/q8_0 (q8_0: head_dim a multiple of 32),
  // sizes that fit the index types.
  Status validate() const;
  // Equal per-block shape (everything except num_blocks): what snapshots must agree on.
  bool same_block_shape(const KVGeometry& other) const;
};

// Everything the logical manager needs to know. One source of truth: the engine builds it once.
struct KVCacheConfig {
  KVGeometry geometry;
  // Loop count R of the model (Ouro-1.4B: 4). Prefill always runs full depth, so every request
  // reserves planes for all R depths under kLastExited even if it caps its own loops lower.
  int32_t depth = 4;
  KVLayout layout = KVLayout::kLastExited;
  // Planes after the loop planes for K/V that do not depend on the loop (Huginn's prelude and
  // coda blocks, packed num_layers to a plane): depth `depth + i` names outer plane i, under
  // either layout. Early-exit finalization never touches them.
  int32_t outer_planes = 0;
  // Admission headroom: int(watermark_ratio * num_blocks) blocks are kept free for the growth of
  // running requests, applied only when other allocations are live. In [0, 1).
  double watermark_ratio = 0.0;
  bool enable_prefix_caching = false;
  // Identity of the weights (model id + weights version); part of every prefix key together with
  // dtype, layout and geometry so a cache can never serve K/V computed by another model.
  std::string model_salt;

  int32_t planes() const { return storage_planes(layout, depth) + outer_planes; }
  int32_t watermark_blocks() const;
  Status validate() const;
};

// Tokens a request's KV must cover: prompt_len + max_new_tokens - 1 (the last sampled token is
// never fed back, so its K/V is never written).
inline int64_t capacity_tokens(int64_t prompt_len, int64_t max_new_tokens) {
  return prompt_len + max_new_tokens - 1;
}

// ceil(tokens / block_size) * planes. Callers pass validated positive sizes.
inline int64_t blocks_for_tokens(int64_t tokens, int32_t block_size, int32_t planes) {
  return (tokens + block_size - 1) / block_size * planes;
}

// The capacity planner: blocks a request needs for its whole life,
// ceil((prompt_len + max_new_tokens - 1) / block_size) * (storage_planes(layout, depth) +
// outer_planes). Errors: prompt_len < 1, max_new_tokens < 1, depth < 1, block_size < 1,
// outer_planes < 0.
Result<int64_t> required_blocks(int64_t prompt_len, int64_t max_new_tokens, KVLayout layout,
                                int32_t depth, int32_t block_size, int32_t outer_planes = 0);

// One step of the early-exit finalize plan: copy the K and V of one token slot, layers
// [layer_begin, layer_end), from (src_block, src_slot) to (dst_block, dst_slot). The manager
// produces these; the runner executes them (in stream order before any later read of dst_plane).
struct SlotCopy {
  BlockId src_block = -1;
  int32_t src_slot = 0;
  BlockId dst_block = -1;
  int32_t dst_slot = 0;
  int32_t dst_plane = 0;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;

  bool operator==(const SlotCopy&) const = default;
};

}  // namespace rlt::kv
