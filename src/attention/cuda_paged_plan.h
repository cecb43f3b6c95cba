// How the cuda_paged backend splits one query row's keys into partitions (flash-decoding). Shared
// by the host (scratch sizing, tests) and the kernels, so it is C++17 and header-only.
//
// The partition size is a function of the row's visible length alone: a row's result never
// depends on what else is in the batch (the backend's `deterministic` declaration), and the grid,
// sized from the table capacity, never depends on the lengths themselves (CUDA-graph safe).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define RLT_HOST_DEVICE __host__ __device__
#else
#define RLT_HOST_DEVICE
#endif

namespace rlt::attention::cuda_paged {

constexpr int32_t kPartitionQuantum = 128;  // tokens: partitions are multiples of this
constexpr int32_t kMaxPartitions = 64;      // per row; longer rows get longer partitions

RLT_HOST_DEVICE inline int32_t partition_tokens(int32_t visible) {
  const int32_t quanta = (visible + kPartitionQuantum - 1) / kPartitionQuantum;
  const int32_t per_partition = (quanta + kMaxPartitions - 1) / kMaxPartitions;
  return (per_partition > 0 ? per_partition : 1) * kPartitionQuantum;
}

RLT_HOST_DEVICE inline int32_t num_partitions(int32_t visible) {
  const int32_t size = partition_tokens(visible);
  return (visible + size - 1) / size;
}

// The grid's partition extent for a call whose rows see at most `capacity` keys: an upper bound
// of num_partitions over every visible length up to `capacity`.
RLT_HOST_DEVICE inline int32_t max_partitions(int64_t capacity) {
  const int64_t quanta = (capacity + kPartitionQuantum - 1) / kPartitionQuantum;
  return static_cast<int32_t>(quanta < kMaxPartitions ? (quanta > 0 ? quanta : 1) : kMaxPartitions);
}

// Packed sequences of at most this many query rows (decode-like: speculative verification, a
// few rows per request) run on the flash-decoding kernels with split keys; longer ones on the
// tiled prefill kernel. A function of the sequence's own row count, never of the batch.
constexpr int32_t kMaxDecodeRows = 8;

// head_dim values the kernels handle: 8 elements per lane, at most one warp per key.
RLT_HOST_DEVICE inline bool head_dim_supported(int32_t head_dim) {
  return head_dim >= 8 && head_dim <= 256 && head_dim % 8 == 0;
}

}  // namespace rlt::attention::cuda_paged
