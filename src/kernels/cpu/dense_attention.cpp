#include "kernels/cpu/dense_attention.h"

#include <cmath>

namespace rlt::kernels {

void dense_attention_row(const DenseAttentionShape& shape, const float* q, const float* k,
                         const float* v, int64_t context, float* scores, float* out) {
  const int64_t d = shape.head_dim;
  const int64_t group = shape.num_heads / shape.num_kv_heads;
  const int64_t kv_stride = shape.num_kv_heads * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t h = 0; h < shape.num_heads; ++h) {
    const float* qh = q + h * d;
    const int64_t kvh = h / group;
    float max_score = -INFINITY;
    for (int64_t j = 0; j < context; ++j) {
      const float* kj = k + j * kv_stride + kvh * d;
      float dot = 0.0f;
      for (int64_t i = 0; i < d; ++i) dot += qh[i] * kj[i];
      scores[j] = dot * scale;
      max_score = std::fmax(max_score, scores[j]);
    }
    float denom = 0.0f;
    for (int64_t j = 0; j < context; ++j) {
      scores[j] = std::exp(scores[j] - max_score);
      denom += scores[j];
    }
    float* oh = out + h * d;
    for (int64_t i = 0; i < d; ++i) oh[i] = 0.0f;
    for (int64_t j = 0; j < context; ++j) {
      const float p = scores[j] / denom;
      const float* vj = v + j * kv_stride + kvh * d;
      for (int64_t i = 0; i < d; ++i) oh[i] += p * vj[i];
    }
  }
}

}  // namespace rlt::kernels
