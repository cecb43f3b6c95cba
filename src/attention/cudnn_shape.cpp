#include "attention/cudnn_shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <functional>

namespace rlt::attention {
namespace {

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

Status check_strides(const PagedKVLayerView& v, const char* which) {
  // cuDNN's kernels move K/V rows with 16-byte copies.
  if (v.block_stride % 8 != 0 || v.token_stride % 8 != 0 || v.head_stride % 8 != 0) {
    return invalid_argument(
        fmt::format("cudnn: the {} view's strides ({}, {}, {}) must be multiples of 8 elements for "
                    "cuDNN's 16-byte loads",
                    which, v.block_stride, v.token_stride, v.head_stride));
  }
  return {};
}

}  // namespace

int64_t CudnnShape::staging_bytes() const {
  const int64_t qo = padded_rows() * q_heads * head_dim * 2;  // 16-bit elements
  return 2 * qo + 2 * batch * 4 + batch * table_width * 4;
}

std::string CudnnShape::describe() const {
  return fmt::format(
      "{} sequences x {} query rows, {} pages of {} tokens, {} query / {} kv heads of {}, {}",
      batch, max_q, table_width, block_size, q_heads, kv_heads, head_dim, dtype_name(dtype));
}

size_t CudnnShapeHash::operator()(const CudnnShape& s) const {
  size_t h = 0;
  const auto mix = [&h](int64_t v) { h = h * 1000003u ^ std::hash<int64_t>{}(v); };
  for (int64_t v :
       {s.batch, int64_t{s.max_q}, int64_t{s.table_width}, int64_t{s.block_size},
        int64_t{s.num_blocks}, int64_t{s.q_heads}, int64_t{s.kv_heads}, int64_t{s.head_dim},
        static_cast<int64_t>(s.dtype), s.k_block_stride, s.k_token_stride, s.k_head_stride,
        s.v_block_stride, s.v_token_stride, s.v_head_stride}) {
    mix(v);
  }
  return h;
}

Result<CudnnShape> cudnn_shape_of(const AttentionParams& p, int64_t staging_limit) {
  if (p.k.dtype != DType::kBF16 && p.k.dtype != DType::kF16) {
    return invalid_argument(
        fmt::format("cudnn: cuDNN's fused attention reads bf16 or f16 K/V, not {}; store the KV "
                    "cache in bf16 (--kv-dtype "
                    "bf16) or use cuda_paged",
                    dtype_name(p.k.dtype)));
  }
  const int32_t d = p.head_dim();
  if (d % 8 != 0 || d < 8 || d > 128) {
    return invalid_argument(
        fmt::format("cudnn: head_dim {} is not a multiple of 8 in [8, 128]; use cuda_paged", d));
  }
  const int32_t bs = p.k.block_size;
  if (bs < 1 || bs > 256 || (bs & (bs - 1)) != 0) {
    return invalid_argument(fmt::format(
        "cudnn: cuDNN's paged attention takes pages of a power of two up to 256 tokens, not {}; "
        "use --block-size 16 or cuda_paged",
        bs));
  }
  RLT_RETURN_IF_ERROR(check_strides(p.k, "K"));
  RLT_RETURN_IF_ERROR(check_strides(p.v, "V"));
  CudnnShape s;
  s.batch = next_power_of_two(std::max<int64_t>(p.num_seqs, 1));
  s.max_q =
      p.cu_seqlens_q ? static_cast<int32_t>(next_power_of_two(std::max(p.max_seqlen_q, 1))) : 1;
  s.table_width = static_cast<int32_t>(next_power_of_two(std::max(p.table_width, 1)));
  s.block_size = p.k.block_size;
  s.num_blocks = p.k.num_blocks;
  s.q_heads = p.num_q_heads;
  s.kv_heads = p.num_kv_heads();
  s.head_dim = d;
  s.dtype = p.k.dtype;
  s.k_block_stride = p.k.block_stride;
  s.k_token_stride = p.k.token_stride;
  s.k_head_stride = p.k.head_stride;
  s.v_block_stride = p.v.block_stride;
  s.v_token_stride = p.v.token_stride;
  s.v_head_stride = p.v.head_stride;
  if (s.staging_bytes() > staging_limit) {
    return resource_exhausted(fmt::format(
        "cudnn: one call of {} needs {} MiB of staging, more than the {} MiB the backend allows; "
        "schedule shorter prefill chunks (--prefill-chunk-size, --max-num-batched-tokens) or use "
        "cuda_paged",
        s.describe(), s.staging_bytes() >> 20, staging_limit >> 20));
  }
  return s;
}

Result<std::vector<SequenceRange>> cudnn_sequence_ranges(const AttentionParams& p,
                                                         const int32_t* host_cu_seqlens_q,
                                                         int64_t staging_limit) {
  std::vector<SequenceRange> ranges;
  if (p.num_seqs == 0) return ranges;
  if (p.cu_seqlens_q == nullptr || host_cu_seqlens_q == nullptr) {
    ranges.push_back({0, p.num_seqs, p.cu_seqlens_q ? std::max(p.max_seqlen_q, 1) : 1});
    return ranges;
  }
  // The staging of `count` sequences padded to `max_q` rows, as cudnn_shape_of counts it.
  CudnnShape probe;
  probe.q_heads = p.num_q_heads;
  probe.head_dim = p.head_dim();
  probe.table_width = static_cast<int32_t>(next_power_of_two(std::max(p.table_width, 1)));
  const auto fits = [&](int64_t count, int32_t max_q) {
    probe.batch = next_power_of_two(count);
    probe.max_q = static_cast<int32_t>(next_power_of_two(max_q));
    return probe.staging_bytes() <= staging_limit;
  };
  SequenceRange current;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int32_t n = host_cu_seqlens_q[s + 1] - host_cu_seqlens_q[s];
    const int32_t max_q = std::max(current.max_q, n);
    if (s > current.begin && !fits(s + 1 - current.begin, max_q)) {
      current.end = s;
      ranges.push_back(current);
      current = {s, s, n};
      continue;
    }
    current.max_q = max_q;
  }
  current.end = p.num_seqs;
  ranges.push_back(current);
  for (const SequenceRange& r : ranges) {
    if (!fits(r.end - r.begin, r.max_q)) {
      return resource_exhausted(fmt::format(
          "cudnn: sequence {} alone has {} query rows, whose staging exceeds the {} MiB the "
          "backend "
          "allows; schedule shorter prefill chunks (--prefill-chunk-size) or use cuda_paged",
          r.begin, r.max_q, staging_limit >> 20));
    }
  }
  return ranges;
}

AttentionParams sequence_range_params(const AttentionParams& p, const SequenceRange& r) {
  // Single-query calls index q and out by sequence: a range of them would need q and out moved.
  assert(p.cu_seqlens_q != nullptr && "sequence ranges are for packed calls");
  AttentionParams q = p;
  q.num_seqs = r.end - r.begin;
  q.max_seqlen_q = r.max_q;
  q.context_lengths = p.context_lengths + r.begin;
  q.block_tables = p.block_tables + r.begin * p.table_width;
  if (p.host_context_lengths) q.host_context_lengths = p.host_context_lengths + r.begin;
  if (p.host_block_tables) q.host_block_tables = p.host_block_tables + r.begin * p.table_width;
  if (p.cu_seqlens_q) q.cu_seqlens_q = p.cu_seqlens_q + r.begin;
  if (p.host_cu_seqlens_q) q.host_cu_seqlens_q = p.host_cu_seqlens_q + r.begin;
  return q;
}

}  // namespace rlt::attention
