// Causal attention of single query rows over a contiguous f32 K/V history. This is the dense
// path of the reference model; paged backends live in src/attention/.
#pragma once

#include <cstdint>

namespace rlt::kernels {

struct DenseAttentionShape {
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // K/V heads; query head h reads K/V head h / (num_heads / num_kv_heads)
  int64_t head_dim = 0;
};

// out[num_heads, head_dim] = softmax(q·Kᵀ · 1/sqrt(head_dim)) · V over keys 0..context-1.
// q: [num_heads, head_dim]; k, v: [context, num_kv_heads, head_dim]; scores: scratch[context].
// Scores and softmax are f32: max-subtract, exp, ordered sum, divide, ordered weighted sum.
void dense_attention_row(const DenseAttentionShape& shape, const float* q, const float* k,
                         const float* v, int64_t context, float* scores, float* out);

}  // namespace rlt::kernels
