// Random paged K/V pools and batches for attention tests and benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "attention/contract.h"
#include "common/half.h"

namespace rlt::attention::testing {

// One layer's K and V pools [blocks, block_size, kv_heads, head_dim] in `dtype`, random N(0,1).
struct PagedPools {
  DType dtype = DType::kF32;
  std::vector<float> kf, vf;     // f32 storage
  std::vector<uint16_t> kh, vh;  // bf16/f16 storage
  PagedKVLayerView k, v;

  PagedPools(DType dt, int32_t blocks, int32_t block_size, int32_t kv_heads, int32_t head_dim,
             std::mt19937& rng)
      : dtype(dt) {
    const size_t n = static_cast<size_t>(blocks) * block_size * kv_heads * head_dim;
    std::normal_distribution<float> dist;
    auto fill = [&](std::vector<float>& f, std::vector<uint16_t>& h) {
      f.resize(n);
      for (float& x : f) x = dist(rng);
      if (dt != DType::kF32) {
        h.resize(n);
        for (size_t i = 0; i < n; ++i)
          h[i] = dt == DType::kBF16 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
      }
    };
    fill(kf, kh);
    fill(vf, vh);
    for (auto* view : {&k, &v}) {
      view->block_stride = int64_t{block_size} * kv_heads * head_dim;
      view->token_stride = int64_t{kv_heads} * head_dim;
      view->head_stride = head_dim;
      view->num_blocks = blocks;
      view->block_size = block_size;
      view->num_kv_heads = kv_heads;
      view->head_dim = head_dim;
      view->dtype = dt;
    }
    k.base = dt == DType::kF32 ? static_cast<void*>(kf.data()) : static_cast<void*>(kh.data());
    v.base = dt == DType::kF32 ? static_cast<void*>(vf.data()) : static_cast<void*>(vh.data());
  }
};

// Page tables for `lengths` drawn without replacement from the pool (fragmented on purpose),
// padded to `width` with `pad` (-1, 0, or a stale-but-valid id when pad == -2).
inline std::vector<int32_t> random_tables(const std::vector<int32_t>& lengths, int32_t block_size,
                                          int32_t blocks, int32_t width, int32_t pad,
                                          std::mt19937& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<int32_t> tables(lengths.size() * static_cast<size_t>(width));
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::shuffle(ids.begin(), ids.end(), rng);
    const int32_t used = (lengths[s] + block_size - 1) / block_size;
    for (int32_t b = 0; b < width; ++b) {
      int32_t fill = pad == -2 ? ids[static_cast<size_t>((b + 7) % blocks)] : pad;
      tables[s * width + b] = b < used ? ids[static_cast<size_t>(b)] : fill;
    }
  }
  return tables;
}

// A call over `pools` for `num_seqs` sequences (single-query rows until cu_seqlens_q is set).
inline AttentionParams paged_params(const PagedPools& pools, const float* q, float* out,
                                    int64_t rows, int32_t q_heads, const int32_t* tables,
                                    int32_t width, const int32_t* lengths, int64_t num_seqs) {
  AttentionParams p;
  p.q = q;
  p.out = out;
  p.rows = rows;
  p.num_q_heads = q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = tables;
  p.table_width = width;
  p.context_lengths = lengths;
  p.num_seqs = num_seqs;
  return p;
}

}  // namespace rlt::attention::testing
