// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear.cpp"
#include "kernels/cpu/linear.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/linear_quant.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "kernels/cpu/panel_lanes-inl.h"
#include "kernels/cpu/stream_prefetch.h"
#include "kernels/cpu/widen-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors of a panel row one pass over k keeps in registers: the whole row on AVX-512 (4), a
// slice elsewhere, so that rows x vectors accumulators plus the weights fit the register file.
constexpr int kSliceVectors = kVectors < 4 ? kVectors : 4;

// Input rows computed together against one panel: each weight vector loaded (and widened) once
// serves all of them. AVX-512 has 32 vector registers: 6 rows x 4 vectors of accumulators.
#if HWY_TARGET <= HWY_AVX3
constexpr int kRowsTile = 6;
#else
constexpr int kRowsTile = 2;
#endif

// The per-element order: y[m, n] = fma(x[m, k-1], W[n, k-1], ... fma(x[m, 0], W[n, 0], 0)), one
// f32 accumulator per output running over k in order. Tiling over rows, slices and panels only
// shares loads, and threads split panels, so the order never depends on the batch or the thread
// count. Input row r of the tile is x + r * k.
//
// Columns [i0, i1) of the tile, with the panel's rows for them at `panel` (column i0 first) and
// the sums in `sums` (rows of kPanel): started from zero, or (kCarry) carried on from the sums
// of the columns before, for a panel that comes block by block. Storing and reloading an f32 sum
// between blocks leaves every fma and its order as in one pass.
template <int kRows, bool kCarry, typename W>
HWY_INLINE void PanelTile(const float* HWY_RESTRICT x, int64_t k, int64_t i0, int64_t i1,
                          const W* HWY_RESTRICT panel, float* HWY_RESTRICT sums) {
  const DF df;
  for (int slice = 0; slice < kVectors; slice += kSliceVectors) {
    VF acc[kRows][kSliceVectors];
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kSliceVectors; ++v)
        acc[r][v] = kCarry ? hn::LoadU(df, sums + r * kPanel + (slice + v) * kLanes) : hn::Zero(df);
    for (int64_t i = i0; i < i1; ++i) {
      const W* wi = panel + (i - i0) * kPanel + slice * kLanes;
      // A packed panel is one forward stream; asking for lines ahead keeps more misses in flight
      // than the hardware prefetcher alone (prefetching past the end is harmless). A block comes
      // from L1.
      if (!kCarry && slice == 0) {
        for (size_t line = 0; line < sizeof(W) * kPanel; line += 64)
          __builtin_prefetch(reinterpret_cast<const char*>(wi) + kPrefetchBytes + line);
      }
      VF wv[kSliceVectors];
      for (int v = 0; v < kSliceVectors; ++v) wv[v] = LoadWidened(df, wi + v * kLanes);
      for (int r = 0; r < kRows; ++r) {
        const VF xb = hn::Set(df, x[r * k + i]);
        for (int v = 0; v < kSliceVectors; ++v) acc[r][v] = hn::MulAdd(xb, wv[v], acc[r][v]);
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kSliceVectors; ++v)
        hn::StoreU(acc[r][v], df, sums + r * kPanel + (slice + v) * kLanes);
  }
}

// A panel whose packing is deferred (PackedMatrix::pending_rows): each block of columns is
// transposed into an L1-sized scratch as packing would have stored it and used at once by every
// input row, so the panel never goes through memory and the results equal the packed kernel's.
// (Taking the panel as two halves of 32 row streams for decode, which the hardware prefetcher
// could follow, measured within noise of this: not kept.)
template <typename W>
void PendingPanel(const float* HWY_RESTRICT x, int64_t m, const PackedMatrix& w,
                  const uint16_t* const* rows, int64_t p, float* HWY_RESTRICT y) {
  constexpr int64_t kBlock = 128;  // 16 KiB of 16-bit weights
  static thread_local std::vector<float> sums;
  alignas(64) uint16_t block[kBlock * kPanel];
  const int64_t k = w.cols();
  sums.assign(static_cast<size_t>(m * kPanel), 0.0f);
  for (int64_t i0 = 0; i0 < k; i0 += kBlock) {
    const int64_t i1 = std::min(k, i0 + kBlock);
    transpose_panel_u16(rows + p * kPanel, k, i0, i1, block);
    const W* wb = reinterpret_cast<const W*>(block);
    int64_t m0 = 0;
    for (; m0 + kRowsTile <= m; m0 += kRowsTile)
      PanelTile<kRowsTile, true>(x + m0 * k, k, i0, i1, wb, sums.data() + m0 * kPanel);
    for (; m0 < m; ++m0) PanelTile<1, true>(x + m0 * k, k, i0, i1, wb, sums.data() + m0 * kPanel);
  }
  store_panel(w, p, sums.data(), static_cast<int>(m), 0, y);
}

template <int kRows, typename W>
HWY_INLINE void PanelRows(const float* HWY_RESTRICT x, const PackedMatrix& w,
                          const W* HWY_RESTRICT panel, int64_t p, int64_t m0,
                          float* HWY_RESTRICT y) {
  float out[kRows][kPanel];
  PanelTile<kRows, false>(x + m0 * w.cols(), w.cols(), 0, w.cols(), panel, &out[0][0]);
  store_panel(w, p, &out[0][0], kRows, m0, y);
}

template <typename W>
void LinearTyped(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  // Read once: a matrix packed in the background meanwhile gives the same results either way.
  [[maybe_unused]] const uint16_t* const* pending = w.pending_rows();
  const auto* base = static_cast<const W*>(w.data());
  const int64_t panel_elems = kPanel * w.cols();
  // Threads split the panels; each output element is still computed by exactly one thread in
  // the fixed order above, so the thread count never changes results. Below ~4M multiply-adds
  // (a few hundred microseconds) a parallel region costs more than it saves, and on a busy
  // machine a descheduled worker can stall it for a whole time slice.
  const bool parallel = m * w.outputs() * w.cols() >= (int64_t{1} << 22);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t p = 0; p < w.panels(); ++p) {
    if constexpr (sizeof(W) == 2) {
      if (pending != nullptr) {
        PendingPanel<W>(x, m, w, pending, p, y);
        continue;
      }
    }
    const W* panel = base + p * panel_elems;
    int64_t m0 = 0;
    for (; m0 + kRowsTile <= m; m0 += kRowsTile) PanelRows<kRowsTile>(x, w, panel, p, m0, y);
    for (; m0 < m; ++m0) PanelRows<1>(x, w, panel, p, m0, y);
  }
}

void LinearImpl(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  switch (w.dtype()) {
    case DType::kBF16:
      LinearTyped<hwy::bfloat16_t>(x, m, w, y);
      break;
    case DType::kF16:
      LinearTyped<hwy::float16_t>(x, m, w, y);
      break;
    default:
      LinearTyped<float>(x, m, w, y);
      break;
  }
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {
HWY_EXPORT(LinearImpl);
HWY_EXPORT(TargetName);

void linear(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  if (m <= 0 || w.empty()) return;
  if (w.layout() == PackedMatrix::Layout::kBf16Pairs) return linear_bf16_pairs(x, m, w, y);
  if (w.layout() == PackedMatrix::Layout::kQuant) return linear_quant(x, m, w, y);
  if (w.layout() == PackedMatrix::Layout::kQuantInt8) return linear_quant_int8(x, m, w, y);
  HWY_DYNAMIC_DISPATCH(LinearImpl)(x, m, w, y);
}

std::string cpu_dispatch_target() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace rlt::kernels
#endif  // HWY_ONCE
