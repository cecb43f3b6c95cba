// Elementwise and per-row f32 operations of the transformer, scalar and in a pinned order
// (see docs/architecture.md "Numerics"): each row's result depends only on that row. Large batches
// spread their rows over the OpenMP threads (parallel_rows.h), which changes no value.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_matrix.h"

namespace rlt::kernels {

// y[r] = w ⊙ (x[r] · 1/sqrt(mean(x[r]²) + eps)) for each of `rows` rows of length n.
// In place is allowed (x == y).
void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y);

// h[r] += w ⊙ (x[r] · 1/sqrt(mean(x[r]²) + eps)): a sub-block's output normalized and added to
// the residual in one pass (the same values as rms_norm followed by an add).
void add_rms_norm(float* h, const float* x, const float* w, int64_t rows, int64_t n, float eps);

// h[i] += x[i].
void add_in_place(float* h, const float* x, int64_t n);

// Split-half rotary embedding (Llama/Qwen "rotate_half"): dimension j pairs with j + d/2.
class Rope {
 public:
  // inv_freq[i] = 1 / theta^(2i/d), in f32 as the reference computes it.
  Rope(int64_t head_dim, double theta);
  // Explicit inverse frequencies (head_dim / 2 of them), e.g. after rope scaling.
  explicit Rope(std::vector<float> inv_freq);
  // 1 / theta^(2i/d) for i < d/2, in f32.
  static std::vector<float> default_inv_freq(int64_t head_dim, double theta);
  // Rotates `heads` vectors of head_dim values at absolute position `pos`, in place.
  void apply(float* x, int64_t heads, int64_t pos) const;
  // The cosines and sines of position `pos`'s angles, head_dim / 2 of each: computed once, they
  // serve every layer of a forward pass (the same values apply(pos) computes).
  void angles(int64_t pos, float* cos, float* sin) const;
  // apply() with angles() of its position.
  void apply(float* x, int64_t heads, const float* cos, const float* sin) const;
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t head_dim_;
  std::vector<float> inv_freq_;
};

// Copies embedding row `token` of `table` ([vocab, hidden]) into out[hidden] as f32.
void embedding_row(const WeightMatrix& table, int64_t token, float* out);

// 1 / (1 + exp(-x)) in f32.
float sigmoid(float x);

// Index of the largest value; the first one among ties (greedy sampling's rule). NaN is never
// chosen over a number.
int64_t argmax(const float* x, int64_t n);

}  // namespace rlt::kernels
