// Random paged K/V pools and batches for attention tests and benchmarks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "attention/contract.h"
#include "common/half.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace rlt::attention::testing {

// One layer's K and V pools [blocks, block_size, kv_heads, head_dim] in `dtype`, random N(0,1).
// Q8_0 pools hold GGML q8_0 blocks per head (strides in bytes); kf / vf then hold their
// dequantized values, and k_dequantized / v_dequantized view those as an f32 pool.
struct PagedPools {
  DType dtype = DType::kF32;
  std::vector<float> kf, vf;     // f32 storage
  std::vector<uint16_t> kh, vh;  // bf16/f16 storage
  std::vector<uint8_t> kq, vq;   // Q8_0 storage
  PagedKVLayerView k, v;
  PagedKVLayerView k_dequantized, v_dequantized;

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
    if (dt == DType::kQ8_0) {
      // Quantized head by head (every head whole blocks), then kf / vf replaced by the values the
      // blocks hold.
      auto quantize = [&](std::vector<float>& f, std::vector<uint8_t>& q) {
        f.resize(n);
        for (float& x : f) x = dist(rng);
        q.resize(n / 32 * 34);
        using quant::GgmlType;
        const auto count = static_cast<int64_t>(n);
        const bool ok = quant::quantize_row(GgmlType::kQ8_0, f.data(), count, q.data()).ok() &&
                        quant::dequantize_row(GgmlType::kQ8_0, q.data(), count, f.data()).ok();
        if (!ok) f.clear();  // the test's check of kf fails
      };
      quantize(kf, kq);
      quantize(vf, vq);
    } else {
      fill(kf, kh);
      fill(vf, vh);
    }
    const int64_t head_units = dt == DType::kQ8_0 ? head_dim / 32 * 34 : head_dim;
    for (auto* view : {&k, &v, &k_dequantized, &v_dequantized}) {
      const int64_t units = view == &k || view == &v ? head_units : head_dim;
      view->block_stride = int64_t{block_size} * kv_heads * units;
      view->token_stride = int64_t{kv_heads} * units;
      view->head_stride = units;
      view->num_blocks = blocks;
      view->block_size = block_size;
      view->num_kv_heads = kv_heads;
      view->head_dim = head_dim;
      view->dtype = view == &k || view == &v ? dt : DType::kF32;
    }
    auto base = [&](std::vector<float>& f, std::vector<uint16_t>& h,
                    std::vector<uint8_t>& q) -> void* {
      if (dt == DType::kF32) return f.data();
      if (dt == DType::kQ8_0) return q.data();
      return h.data();
    };
    k.base = base(kf, kh, kq);
    v.base = base(vf, vh, vq);
    k_dequantized.base = kf.data();
    v_dequantized.base = vf.data();
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
