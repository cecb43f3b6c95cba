#include "kernels/cpu/linear_bf16.h"

#include <cstring>
#include <vector>

#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/stream_prefetch.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// Only these functions use AVX-512 BF16; callers check bf16_dot_supported() first.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")

namespace rlt::kernels {
namespace {

constexpr int64_t kPanel = PackedMatrix::kPanelWidth;
constexpr int kVectors = static_cast<int>(kPanel / 16);  // 16 f32 lanes per vector
constexpr int kRowsTile = 6;

// Rows of x rounded to bf16 (nearest even), each padded to an even length, read as column pairs.
void round_rows(const float* x, int64_t m, int64_t k, int64_t k2, uint16_t* out) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * k;
    uint16_t* o = out + r * k2;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(xr + i));
      std::memcpy(o + i, &h, sizeof(h));
    }
    if (i < k) {
      alignas(64) float tail[16] = {};
      std::memcpy(tail, xr + i, static_cast<size_t>(k - i) * sizeof(float));
      const __m256bh h = _mm512_cvtneps_pbh(_mm512_load_ps(tail));
      std::memcpy(o + i, &h, static_cast<size_t>(k2 - i) * sizeof(uint16_t));
    }
  }
}

template <int kRows>
void panel_tile(const uint16_t* xb, int64_t k2, const uint16_t* panel, float* out) {
  __m512 acc[kRows][kVectors];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t pairs = k2 / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    const uint16_t* wi = panel + i * kPanel * 2;
    for (int line = 0; line < static_cast<int>(kPanel * 2 * sizeof(uint16_t)); line += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(wi) + kPrefetchBytes + line);
    __m512bh wv[kVectors];
    for (int v = 0; v < kVectors; ++v) wv[v] = (__m512bh)_mm512_loadu_si512(wi + v * 32);
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      std::memcpy(&pair, xb + r * k2 + 2 * i, sizeof(pair));
      const __m512bh b = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wv[v], b);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(out + r * kPanel + v * 16, acc[r][v]);
}

template <int kRows>
void panel_rows(const uint16_t* xb, int64_t k2, const PackedMatrix& w, const uint16_t* panel,
                int64_t p, int64_t m0, float* y) {
  alignas(64) float out[kRows * kPanel];
  panel_tile<kRows>(xb + m0 * k2, k2, panel, out);
  store_panel(w, p, out, kRows, m0, y);
}

}  // namespace

void linear_bf16_pairs(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  if (m <= 0 || w.empty()) return;
  const int64_t k = w.cols(), k2 = (k + 1) / 2 * 2;
  // The calling thread's buffer, shared read-only with the workers; grows to the largest batch.
  thread_local std::vector<uint16_t> rounded;
  if (rounded.size() < static_cast<size_t>(m * k2)) rounded.resize(static_cast<size_t>(m * k2));
  // Threads round blocks of rows, each row as on one thread.
  parallel_blocks(m, 8, k, [&, out = rounded.data()](int64_t r0, int64_t r1) {
    round_rows(x + r0 * k, r1 - r0, k, k2, out + r0 * k2);
  });
  const uint16_t* xb = rounded.data();
  const auto* base = static_cast<const uint16_t*>(w.data());
  const int64_t panel_elems = kPanel * k2;
  const bool parallel = m * w.outputs() * k >= (int64_t{1} << 22);  // as the f32 kernel
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < w.panels(); ++p) {
    const uint16_t* panel = base + p * panel_elems;
    int64_t m0 = 0;
    for (; m0 + kRowsTile <= m; m0 += kRowsTile) panel_rows<kRowsTile>(xb, k2, w, panel, p, m0, y);
    for (; m0 < m; ++m0) panel_rows<1>(xb, k2, w, panel, p, m0, y);
  }
}

}  // namespace rlt::kernels

#pragma GCC pop_options

namespace rlt::kernels {
bool bf16_dot_supported() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
  }();
  return supported;
}
}  // namespace rlt::kernels

#else  // not x86-64

namespace rlt::kernels {
bool bf16_dot_supported() {
  return false;
}
void linear_bf16_pairs(const float*, int64_t, const PackedMatrix&, float*) {}
}  // namespace rlt::kernels

#endif
