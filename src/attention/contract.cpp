#include "attention/contract.h"

#include <fmt/format.h>

namespace rlt::attention {

namespace {
constexpr const char* kNullPointer =
    "attention: a required pointer (q, out, block_tables, context_lengths, k, v) is null";
}  // namespace

Status validate_attention_params(const AttentionParams& p) {
  RLT_RETURN_IF_ERROR(validate_attention_metadata(p));
  if (p.rows > 0 && (!p.q || !p.out)) return invalid_argument(kNullPointer);
  return {};
}

Status validate_attention_metadata(const AttentionParams& p) {
  if (p.rows == 0) return {};
  if (p.rows < 0 || p.num_seqs <= 0) {
    return invalid_argument(fmt::format("attention: {} rows in {} sequences", p.rows, p.num_seqs));
  }
  if (!p.block_tables || !p.context_lengths || !p.k.base || !p.v.base) {
    return invalid_argument(kNullPointer);
  }
  const auto& k = p.k;
  const auto& v = p.v;
  if (k.head_dim != v.head_dim || k.num_kv_heads != v.num_kv_heads || k.block_size != v.block_size ||
      k.num_blocks != v.num_blocks || k.dtype != v.dtype) {
    return invalid_argument("attention: K and V views disagree in geometry or dtype");
  }
  if (k.num_kv_heads <= 0 || p.num_q_heads <= 0 || p.num_q_heads % k.num_kv_heads != 0) {
    return invalid_argument(fmt::format("attention: {} query heads are not a multiple of {} kv heads",
                                        p.num_q_heads, k.num_kv_heads));
  }
  if (k.head_dim <= 0 || k.block_size <= 0 || p.table_width <= 0) {
    return invalid_argument(fmt::format("attention: head_dim {}, block_size {}, table_width {} must be positive",
                                        k.head_dim, k.block_size, p.table_width));
  }
  if (!p.cu_seqlens_q && p.num_seqs != p.rows) {
    return invalid_argument(fmt::format("attention: single-query call with {} rows but {} sequences",
                                        p.rows, p.num_seqs));
  }
  if (p.cu_seqlens_q && (p.cu_seqlens_q[0] != 0 || p.cu_seqlens_q[p.num_seqs] != p.rows)) {
    return invalid_argument(fmt::format("attention: cu_seqlens_q must run from 0 to rows ({}), got {} .. {}",
                                        p.rows, p.cu_seqlens_q[0], p.cu_seqlens_q[p.num_seqs]));
  }
  const int64_t capacity = int64_t{p.table_width} * k.block_size;
  for (int64_t s = 0; s < p.num_seqs; ++s) {
    const int64_t n = p.seq_end(s) - p.seq_begin(s);
    const int64_t len = p.context_lengths[s];
    if (n < 1 || n > p.max_seqlen_q) {
      return invalid_argument(fmt::format("attention: sequence {} has {} query rows (max_seqlen_q {})", s, n,
                                          p.max_seqlen_q));
    }
    if (len < n || len > capacity) {
      return invalid_argument(fmt::format("attention: sequence {} has context length {}, outside [{}, {}] "
                                          "(query rows .. table_width x block_size)", s, len, n, capacity));
    }
    const int32_t* table = p.block_tables + s * p.table_width;
    for (int64_t b = 0; b < (len + k.block_size - 1) / k.block_size; ++b) {
      if (table[b] < 0 || table[b] >= k.num_blocks) {
        return invalid_argument(fmt::format("attention: sequence {} reads block id {} at table column {}, "
                                            "outside the pool's [0, {})", s, table[b], b, k.num_blocks));
      }
    }
  }
  return {};
}

}  // namespace rlt::attention
