#include "kernels/cpu/ops.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/parallel_rows.h"

namespace rlt::kernels {

namespace {
// Σ x² as sixteen interleaved partial sums (element i into sum i mod 16), then added pairwise:
// one fixed order whatever the rows or the CPU, in sixteen independent chains the compiler keeps
// in one vector. A single chain of adds waited ~0.8 µs on their latency per 576-wide row, a
// speculative verification's rows paying it 61 times each on one thread.
float inv_rms(const float* x, int64_t n, float eps) {
  constexpr int64_t kParts = 16;
  float part[kParts] = {};
  int64_t i = 0;
  for (; i + kParts <= n; i += kParts)
    for (int64_t j = 0; j < kParts; ++j) part[j] += x[i + j] * x[i + j];
  for (int64_t j = 0; i + j < n; ++j) part[j] += x[i + j] * x[i + j];
  for (int64_t width = kParts / 2; width > 0; width /= 2)
    for (int64_t j = 0; j < width; ++j) part[j] += part[j + width];
  return 1.0f / std::sqrt(part[0] / static_cast<float>(n) + eps);
}
}  // namespace

void rms_norm(const float* x, const float* w, int64_t rows, int64_t n, float eps, float* y) {
  parallel_rows(rows, n, [&](int64_t r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float scale = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * scale);
  });
}

void add_rms_norm(float* h, const float* x, const float* w, int64_t rows, int64_t n, float eps) {
  parallel_rows(rows, n, [&](int64_t r) {
    const float* xr = x + r * n;
    float* hr = h + r * n;
    const float scale = inv_rms(xr, n, eps);
    for (int64_t i = 0; i < n; ++i) hr[i] += w[i] * (xr[i] * scale);
  });
}

void add_in_place(float* h, const float* x, int64_t n) {
  // Split into fixed chunks only so that threads can share them: each element is one add.
  parallel_blocks(n, 4096, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) h[i] += x[i];
  });
}

std::vector<float> Rope::default_inv_freq(int64_t head_dim, double theta) {
  std::vector<float> inv_freq(static_cast<size_t>(head_dim / 2));
  const float base = static_cast<float>(theta);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  return inv_freq;
}

Rope::Rope(int64_t head_dim, double theta) : Rope(default_inv_freq(head_dim, theta)) {}

Rope::Rope(std::vector<float> inv_freq)
    : head_dim_(static_cast<int64_t>(inv_freq.size()) * 2), inv_freq_(std::move(inv_freq)) {}

void Rope::angles(int64_t pos, float* cos, float* sin) const {
  for (int64_t i = 0; i < head_dim_ / 2; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq_[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

void Rope::apply(float* x, int64_t heads, const float* cos, const float* sin) const {
  const int64_t half = head_dim_ / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void Rope::apply(float* x, int64_t heads, int64_t pos) const {
  std::vector<float> cs(static_cast<size_t>(head_dim_));
  angles(pos, cs.data(), cs.data() + head_dim_ / 2);
  apply(x, heads, cs.data(), cs.data() + head_dim_ / 2);
}

void embedding_row(const WeightMatrix& table, int64_t token, float* out) {
  table.row_to_f32(token, out);
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
  return best;
}

}  // namespace rlt::kernels
