// The `cudnn` backend's own kernels around cuDNN's attention (cudnn_staging.cu). The contract's Q
// and output are f32 packed rows; cuDNN reads Q and writes O in the K/V type, one padded block of
// rows per sequence. These kernels stage the query rows and the per-sequence metadata in that
// form and copy the output rows back. C++17 and free of CUDA headers.
#pragma once

#include <cstdint>

#include "cuda/model_kernels.h"
#include "rlt/status.h"

struct CUstream_st;

namespace rlt::attention::cudnn_staging {

struct Staging {
  // The call, as the contract gives it (device pointers).
  const float* q = nullptr;  // [rows, q_heads, head_dim]
  float* out = nullptr;
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1], or null for one query row per sequence
  const int32_t* context_lengths = nullptr;
  const int32_t* block_tables = nullptr;  // [num_seqs, table_width]
  int32_t num_seqs = 0;
  int32_t table_width = 0;
  int32_t block_size = 0;
  int32_t q_heads = 0;
  int32_t head_dim = 0;
  cuda::ElementType element = cuda::ElementType::kBF16;  // K/V type: bf16 or f16
  // The padded shape cuDNN runs at, and its buffers (device).
  int64_t batch = 0;         // >= num_seqs
  int32_t max_q = 1;         // query rows per sequence
  int32_t padded_width = 0;  // >= table_width
  void* q_padded = nullptr;  // [batch, max_q, q_heads, head_dim], element type
  const void* o_padded = nullptr;
  int32_t* seq_len_q = nullptr;   // [batch]
  int32_t* seq_len_kv = nullptr;  // [batch]
  int32_t* page_table = nullptr;  // [batch, padded_width]
};

// Rounds the query rows into their padded places (unused places zero), writes each sequence's
// query count and context length (padding sequences: one query over one key) and a page table
// whose entries past a sequence's context are block 0, so cuDNN never follows a stale or negative
// id. Asynchronous.
Status stage_inputs(const Staging& s, CUstream_st* stream);

// Widens the output rows cuDNN wrote back into the contract's packed f32 rows. Asynchronous.
Status unstage_output(const Staging& s, CUstream_st* stream);

}  // namespace rlt::attention::cudnn_staging
