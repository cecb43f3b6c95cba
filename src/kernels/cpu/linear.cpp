// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The per-element order: one vector accumulator over the whole-vector part of k (fused
// multiply-add), a lane reduction, then the scalar tail added in order.
// Tiles of kRowsTile x kColsTile only share loads; they never change that order.
constexpr int64_t kColsTile = 4;

template <int kRows, typename W>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, int64_t k, const W* HWY_RESTRICT w, int64_t n0,
                     int64_t ncols, int64_t m0, int64_t out_stride, float* HWY_RESTRICT y) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t kvec = k - k % lanes;
  hn::Vec<decltype(df)> acc[kRows][kColsTile];
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kColsTile; ++c) acc[r][c] = hn::Zero(df);
  for (int64_t i = 0; i < kvec; i += lanes) {
    hn::Vec<decltype(df)> xv[kRows];
    for (int r = 0; r < kRows; ++r) xv[r] = hn::LoadU(df, x + (m0 + r) * k + i);
    for (int c = 0; c < kColsTile; ++c) {
      if (c >= ncols) break;
      const auto wv = LoadWidened(df, w + (n0 + c) * k + i);
      for (int r = 0; r < kRows; ++r) acc[r][c] = hn::MulAdd(xv[r], wv, acc[r][c]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < ncols; ++c) {
      float sum = hn::GetLane(hn::SumOfLanes(df, acc[r][c]));
      const float* xr = x + (m0 + r) * k;
      const W* wr = w + (n0 + c) * k;
      for (int64_t i = kvec; i < k; ++i) sum += xr[i] * WidenScalar(wr[i]);
      y[(m0 + r) * out_stride + n0 + c] = sum;
    }
  }
}

template <typename W>
void LinearTyped(const float* x, int64_t m, const W* w, int64_t n, int64_t k, float* y) {
  const int64_t col_blocks = (n + kColsTile - 1) / kColsTile;
  // Threads split the output columns; each element is still computed by exactly one thread in
  // the fixed order above, so the thread count never changes results. Below ~4M multiply-adds
  // (a few hundred microseconds) a parallel region costs more than it saves, and on a busy
  // machine a descheduled worker can stall it for a whole time slice.
  const bool parallel = m * n * k >= (int64_t{1} << 22);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t b = 0; b < col_blocks; ++b) {
    const int64_t n0 = b * kColsTile;
    const int64_t ncols = std::min<int64_t>(kColsTile, n - n0);
    int64_t m0 = 0;
    for (; m0 + 2 <= m; m0 += 2) Tile<2>(x, k, w, n0, ncols, m0, n, y);
    for (; m0 < m; ++m0) Tile<1>(x, k, w, n0, ncols, m0, n, y);
  }
}

void LinearImpl(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  switch (w.dtype) {
    case DType::kBF16:
      LinearTyped(x, m, static_cast<const hwy::bfloat16_t*>(w.data), w.rows, w.cols, y);
      break;
    case DType::kF16:
      LinearTyped(x, m, static_cast<const hwy::float16_t*>(w.data), w.rows, w.cols, y);
      break;
    default:
      LinearTyped(x, m, static_cast<const float*>(w.data), w.rows, w.cols, y);
      break;
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {
HWY_EXPORT(LinearImpl);
HWY_EXPORT(TargetName);

void linear(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  if (m <= 0 || w.rows <= 0) return;
  HWY_DYNAMIC_DISPATCH(LinearImpl)(x, m, w, y);
}

std::string cpu_dispatch_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace rlt::kernels
#endif  // HWY_ONCE
