// The attention backend contract: every backend (CPU or CUDA) computes exactly this.
//
// Rows are grouped into sequences. Sequence s has query rows [cu_seqlens_q[s], cu_seqlens_q[s+1])
// (or exactly row s when cu_seqlens_q is null: single-query rows, as in decode and recurrent depth
// steps) and reads K/V through its own page table, already selected for the row's depth plane.
// Causal, bottom-right aligned: with n query rows and context length L, query j (0-based) sits
// at position L - n + j and attends to keys 0 .. L - n + j. The current rows' K/V are already
// written; backends never append K/V.
//
//   q, out          f32 [rows, num_q_heads, head_dim]
//   k, v            one layer of the paged pools: [blocks, block_size, num_kv_heads, head_dim]
//                   with the strides of kv::PagedKVLayerView, in f32, bf16 or f16
//   block_tables    int32 [num_seqs, table_width]; entries past a sequence's context are padding
//                   of any value (-1, 0 or a stale id) and are never read
//   context_lengths int32 [num_seqs], 1 .. table_width · block_size
//   scale           fixed at 1 / sqrt(head_dim), applied after the dot; scores and softmax in f32
//   GQA             query head h reads K/V head h / (num_q_heads / num_kv_heads)
// CUDA backends read every pointer from device memory and launch on `stream`; the same metadata
// is also passed on the host (host_*) so validation never reads the device.
// An empty batch (rows == 0) is valid and does nothing.
#pragma once

#include <cstdint>

#include "kv/layer_view.h"
#include "rlt/status.h"

namespace rlt::attention {

using kv::PagedKVLayerView;

struct AttentionParams {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t rows = 0;
  int32_t num_q_heads = 0;
  PagedKVLayerView k, v;
  const int32_t* block_tables = nullptr;
  int32_t table_width = 0;
  const int32_t* context_lengths = nullptr;
  int64_t num_seqs = 0;
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1], or null for single-query rows
  int32_t max_seqlen_q = 1;
  void* stream = nullptr;  // CUDA backends: the cudaStream_t to launch on (null: default stream)
  const int32_t* host_block_tables = nullptr;     // CUDA backends: host copies of the metadata
  const int32_t* host_context_lengths = nullptr;
  const int32_t* host_cu_seqlens_q = nullptr;

  // The same call with the host copies of the metadata in place of the device pointers.
  AttentionParams host_metadata_view() const {
    AttentionParams h = *this;
    h.block_tables = host_block_tables;
    h.context_lengths = host_context_lengths;
    h.cu_seqlens_q = cu_seqlens_q ? host_cu_seqlens_q : nullptr;
    return h;
  }

  int32_t head_dim() const { return k.head_dim; }
  int32_t num_kv_heads() const { return k.num_kv_heads; }
  int64_t seq_begin(int64_t s) const { return cu_seqlens_q ? cu_seqlens_q[s] : s; }
  int64_t seq_end(int64_t s) const { return cu_seqlens_q ? cu_seqlens_q[s + 1] : s + 1; }
};

// Checks shapes, lengths and every table entry a sequence will read, once per call, so kernels
// never re-validate. Errors carry the offending numbers.
Status validate_attention_params(const AttentionParams& p);
// The same checks without q and out: everything the layers of one pass share (the metadata, and
// the pool geometry, which is the same in every layer), so that a pass is validated once.
Status validate_attention_metadata(const AttentionParams& p);

// Locates element (token t of a sequence's table, head h) in a layer view.
inline int64_t kv_offset(const PagedKVLayerView& view, const int32_t* table, int64_t t, int64_t head) {
  const int64_t block = table[t / view.block_size];
  return block * view.block_stride + (t % view.block_size) * view.token_stride + head * view.head_stride;
}

}  // namespace rlt::attention
