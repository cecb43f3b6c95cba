#include "kv/kv_types.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace rlt::kv {

Status KVGeometry::validate() const {
  if (num_blocks < 1 || num_layers < 1 || block_size < 1 || num_kv_heads < 1 || head_dim < 1) {
    return invalid_argument(fmt::format(
        "KV geometry needs positive sizes, got num_blocks {} num_layers {} block_size {} "
        "num_kv_heads {} head_dim {}",
        num_blocks, num_layers, block_size, num_kv_heads, head_dim));
  }
  if (!is_weight_float(dtype) && dtype != DType::kQ8_0) {
    return invalid_argument(
        fmt::format("KV dtype must be F32, BF16, F16 or Q8_0, got {}", dtype_name(dtype)));
  }
  if (dtype == DType::kQ8_0 && head_dim % 32 != 0) {
    return invalid_argument(fmt::format(
        "a Q8_0 K/V cache quantizes each head in blocks of 32 values, but head_dim is {}; use "
        "--kv-dtype bf16 (or f32) for this model",
        head_dim));
  }
  // Slot offsets inside a block are int32 everywhere (block tables, copy records).
  if (int64_t{block_size} * slot_units() > std::numeric_limits<int32_t>::max()) {
    return invalid_argument(fmt::format("KV block of {} x {} x {} elements is too large",
                                        block_size, num_kv_heads, head_dim));
  }
  return {};
}

bool KVGeometry::same_block_shape(const KVGeometry& o) const {
  return num_layers == o.num_layers && block_size == o.block_size &&
         num_kv_heads == o.num_kv_heads && head_dim == o.head_dim && dtype == o.dtype;
}

int32_t KVCacheConfig::watermark_blocks() const {
  return static_cast<int32_t>(std::floor(watermark_ratio * geometry.num_blocks));
}

Status KVCacheConfig::validate() const {
  RLT_RETURN_IF_ERROR(geometry.validate());
  if (depth < 1) return invalid_argument(fmt::format("KV depth must be >= 1, got {}", depth));
  if (outer_planes < 0) return invalid_argument(fmt::format("outer planes must be >= 0, got {}", outer_planes));
  if (geometry.num_blocks < planes()) {
    return invalid_argument(fmt::format("KV pool of {} blocks cannot hold one page of {} planes",
                                        geometry.num_blocks, planes()));
  }
  if (!(watermark_ratio >= 0.0 && watermark_ratio < 1.0)) {
    return invalid_argument(
        fmt::format("watermark_ratio must be in [0, 1), got {}", watermark_ratio));
  }
  if (enable_prefix_caching && layout != KVLayout::kLastExited) {
    // Upstream rejects it too: under `shared` a cached page would carry each token's final
    // version, which the later request's own prefill semantics do not guarantee to reproduce.
    return unimplemented("prefix caching requires KV layout last_exited, got shared");
  }
  return {};
}

Result<int64_t> required_blocks(int64_t prompt_len, int64_t max_new_tokens, KVLayout layout,
                                int32_t depth, int32_t block_size, int32_t outer_planes) {
  if (prompt_len < 1 || max_new_tokens < 1 || depth < 1 || block_size < 1 || outer_planes < 0) {
    return invalid_argument(fmt::format(
        "required_blocks needs positive sizes, got prompt_len {} max_new_tokens {} depth {} "
        "block_size {} outer_planes {}",
        prompt_len, max_new_tokens, depth, block_size, outer_planes));
  }
  return blocks_for_tokens(capacity_tokens(prompt_len, max_new_tokens), block_size,
                           storage_planes(layout, depth) + outer_planes);
}

}  // namespace rlt::kv
