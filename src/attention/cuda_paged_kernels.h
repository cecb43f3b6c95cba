// Launch interface of the cuda_paged kernels (cuda_paged.cu). C++17 and free of CUDA headers:
// the backend (C++20) fills a PagedLaunch from AttentionParams and scratch it owns.
#pragma once

#include <cstdint>

#include "cuda/model_kernels.h"
#include "rlt/status.h"

struct CUstream_st;

namespace rlt::attention::cuda_paged {

using cuda::ElementType;

struct PagedLaunch {
  const float* q = nullptr;  // [rows, num_q_heads, head_dim]
  float* out = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;  // elements
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;
  ElementType kv_element = ElementType::kF32;
  int32_t num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0;
  const int32_t* block_tables = nullptr;  // device
  int32_t table_width = 0;
  const int32_t* context_lengths = nullptr;  // device
  const int32_t* cu_seqlens_q = nullptr;     // device, or null for one row per sequence
  int32_t num_seqs = 0;
  int32_t max_seqlen_q = 1;
  // Decode work units: rows (one row per sequence), or for packed calls kMaxDecodeRows slots per
  // sequence (sequences longer than that go to the tiled prefill kernel instead).
  bool by_sequence = false;
  int64_t units = 0;
  // Partial states of split rows: per (launch row, head, partition) head_dim sums, then (max, sum).
  float* partial_acc = nullptr;  // [rows_per_launch (units), num_q_heads, max_partitions, head_dim]
  float* partial_ml = nullptr;   // [rows_per_launch (units), num_q_heads, max_partitions, 2]
  int32_t max_partitions = 1;
  int64_t rows_per_launch = 0;  // the scratch holds this many units' partial states
};

// Packed sequences longer than kMaxDecodeRows run on tensor cores (cuda_paged_prefill_tc.cu)
// when the K/V are 16-bit and head_dim is 64 or 128; otherwise on the f32 tiled kernel.
inline bool tensor_core_prefill_supported(ElementType kv, int32_t head_dim) {
  return kv != ElementType::kF32 && (head_dim == 64 || head_dim == 128);
}

// Launches the partition and merge kernels over every decode unit, `rows_per_launch` units at a
// time, then the prefill kernel for packed sequences longer than kMaxDecodeRows.
// Asynchronous; returns the launch status.
Status launch_paged_attention(const PagedLaunch& launch, CUstream_st* stream);

// The tensor-core prefill alone (launch_paged_attention calls it); errors unless
// tensor_core_prefill_supported.
Status launch_tensor_core_prefill(const PagedLaunch& launch, CUstream_st* stream);

}  // namespace rlt::attention::cuda_paged
