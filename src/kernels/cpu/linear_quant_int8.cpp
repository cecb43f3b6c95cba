// Highway dynamic dispatch: this file is compiled once per SIMD target. The kernel itself is
// written with AVX2 intrinsics (vpmaddubsw: unsigned x signed bytes, pairwise summed to int16,
// has no Highway op in the version Debian ships), so it exists on the x86 targets from AVX2 up
// and the others report it unsupported (packing then keeps the f32-activation layout).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_quant_int8.cpp"
#include "kernels/cpu/linear_quant_int8.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/quant_panels.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

using quant::GgmlType;
constexpr int64_t kPanel = PackedMatrix::kPanelWidth;
constexpr int64_t kQuadBytes = 4 * kPanel;  // one column quad (octet for nibbles) of 64 outputs
constexpr int kVectors = kPanel / 8;        // 8 int32 / f32 lanes per 256-bit vector

template <GgmlType T>
struct Int8Traits {
  static constexpr QuantPanelFormat kFormat = *quant_panel_format(T);
  static constexpr QuantBlockLayout kLayout = quant_block_layout(kFormat);
};

HWY_INLINE __m256i LoadBytes(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// Four consecutive int8 activations in every 32-bit lane.
HWY_INLINE __m256i BroadcastQuad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The block-wide factors of the 8 outputs from slot s0: d, and dmin where the type has one.
template <GgmlType T>
struct BlockFactors {
  __m256 d, dmin;
};
template <GgmlType T>
HWY_INLINE BlockFactors<T> LoadBlockFactors(const uint8_t* blk, int64_t s0) {
  constexpr QuantBlockLayout l = Int8Traits<T>::kLayout;
  BlockFactors<T> f;
  f.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + l.d + 2 * s0)));
  if constexpr (Int8Traits<T>::kFormat.has_offset)
    f.dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + l.m + 2 * s0)));
  else
    f.dmin = _mm256_setzero_ps();
  return f;
}

// Group g's scale and offset for the 8 outputs from slot s0, rounded as the f32 kernel's (and
// ggml's dequantization: d · sc once, the offset −(dmin · m) likewise).
template <GgmlType T>
HWY_INLINE void Scales(const uint8_t* blk, const BlockFactors<T>& f, int64_t g, int64_t s0,
                       __m256& s, __m256& o) {
  using Tr = Int8Traits<T>;
  constexpr QuantBlockLayout l = Tr::kLayout;
  if constexpr (Tr::kFormat.block_cols == 32) {
    s = f.d;
    o = f.dmin;
  } else if constexpr (T == GgmlType::kQ6_K) {
    const __m128i sc =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + l.scales + g * kPanel + s0));
    s = _mm256_mul_ps(f.d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
  } else {
    const __m128i sc =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + l.scales + g * kPanel + s0));
    const __m128i mn =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + l.mins + g * kPanel + s0));
    s = _mm256_mul_ps(f.d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
    o = _mm256_xor_ps(_mm256_mul_ps(f.dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))),
                      _mm256_set1_ps(-0.0f));
  }
}

// A stretch of the panel to prefetch, spread over the `parts` steps of a group's loop so that
// misses stay in flight alongside the arithmetic rather than arriving in one burst.
struct Ahead {
  const char* at = nullptr;  // null: nothing to prefetch (prefill tiles)
  int64_t bytes = 0;
};
template <int kParts>
HWY_INLINE void PrefetchPart(const Ahead& ahead, int part) {
  if (ahead.at == nullptr) return;
  constexpr int64_t kLine = 64;
  const int64_t lines = (ahead.bytes + kLine - 1) / kLine, per = (lines + kParts - 1) / kParts;
  for (int64_t i = part * per; i < std::min(lines, (part + 1) * per); ++i)
    __builtin_prefetch(ahead.at + i * kLine);
}

// Σ q · qx over group g of block `blk` (columns col0.. of the activations) for kR rows and the kV
// vectors of outputs from vector v0, added to acc in int32 (exact: see the bounds below).
template <GgmlType T, int kR, int kV>
HWY_INLINE void GroupDots(const uint8_t* HWY_RESTRICT blk, int64_t g, int v0,
                          const int8_t* const (&xq)[kR], int64_t col0, __m256i (&acc)[kR][kV],
                          const Ahead& ahead = {}) {
  using Tr = Int8Traits<T>;
  constexpr QuantPanelFormat f = Tr::kFormat;
  constexpr QuantBlockLayout l = Tr::kLayout;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const int64_t gc = g * f.group_cols;  // the group's first column inside the block
  // Loops run vector-outer, row-inner: a weight vector is decoded once and used by every row
  // while the accumulators, not the decoded weights, take the registers.
  if constexpr (f.quant_bits == 8) {
    // One quad at a time: a Q8_0 pair sum reaches 2 · 127 · 127, so each goes to int32 at once.
    for (int64_t j = gc / 4; j < (gc + f.group_cols) / 4; ++j) {
      PrefetchPart<f.group_cols / 4>(ahead, static_cast<int>(j - gc / 4));
      for (int v = 0; v < kV; ++v) {
        const __m256i w = LoadBytes(blk + l.bytes8 + j * kQuadBytes + (v0 + v) * 32);
        const __m256i aw = T == GgmlType::kQ8_0 ? _mm256_abs_epi8(w) : w;
        for (int r = 0; r < kR; ++r) {
          const __m256i xb = BroadcastQuad(xq[r] + col0 + 4 * j);
          // Signed Q8_0 weights: |w| times x carrying w's sign; Q5_0 / Q5_1 are unsigned.
          const __m256i xs = T == GgmlType::kQ8_0 ? _mm256_sign_epi8(xb, w) : xb;
          acc[r][v] =
              _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xs), ones));
        }
      }
    }
  } else if constexpr (f.quant_bits == 4) {
    // 4-bit quants: a pair sum is at most 2 · 15 · 127, so the group's 8 products per lane add up
    // in int16 (≤ 30480) and widen once.
    __m256i s16[kR][kV];
    for (int r = 0; r < kR; ++r)
      for (int v = 0; v < kV; ++v) s16[r][v] = _mm256_setzero_si256();
    for (int64_t j = gc / 8; j < (gc + f.group_cols) / 8; ++j) {
      PrefetchPart<f.group_cols / 8>(ahead, static_cast<int>(j - gc / 8));
      for (int v = 0; v < kV; ++v) {
        const __m256i raw = LoadBytes(blk + l.nibbles + j * kQuadBytes + (v0 + v) * 32);
        const __m256i lo = _mm256_and_si256(raw, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        for (int r = 0; r < kR; ++r) {
          const __m256i xl = BroadcastQuad(xq[r] + col0 + 8 * j);
          const __m256i xh = BroadcastQuad(xq[r] + col0 + 8 * j + 4);
          s16[r][v] = _mm256_add_epi16(s16[r][v], _mm256_maddubs_epi16(lo, xl));
          s16[r][v] = _mm256_add_epi16(s16[r][v], _mm256_maddubs_epi16(hi, xh));
        }
      }
    }
    for (int r = 0; r < kR; ++r)
      for (int v = 0; v < kV; ++v)
        acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_madd_epi16(s16[r][v], ones));
  } else if constexpr (f.quant_bits == 5) {
    // Q5_K: five carrier quads per group (quant_panels.h). A pair sum reaches 2 · 31 · 127, so
    // four quads (two products per lane each) add up in int16 (≤ 31496) before each widening.
    // Right shifts are 16-bit: a byte masked to bits ≥ the shift count keeps its bits.
    const __m256i low5 = _mm256_set1_epi8(0x1F), top3 = _mm256_set1_epi8(static_cast<char>(0xE0));
    const __m256i mid2 = _mm256_set1_epi8(0x60), bit7 = _mm256_set1_epi8(static_cast<char>(0x80));
    for (int v = 0; v < kV; ++v) {
      PrefetchPart<kV>(ahead, v);
      const uint8_t* base = blk + l.nibbles + 5 * g * kQuadBytes + (v0 + v) * 32;
      __m256i c[5];
      for (int i = 0; i < 5; ++i) c[i] = LoadBytes(base + i * kQuadBytes);
      const __m256i q5 = _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(c[0], top3), 5),
                                         _mm256_srli_epi16(_mm256_and_si256(c[3], mid2), 2));
      const __m256i q6 = _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(c[1], top3), 5),
                                         _mm256_srli_epi16(_mm256_and_si256(c[4], mid2), 2));
      const __m256i q7 = _mm256_or_si256(
          _mm256_srli_epi16(_mm256_and_si256(c[2], top3), 5),
          _mm256_srli_epi16(_mm256_or_si256(_mm256_and_si256(c[4], bit7),
                                            _mm256_srli_epi16(_mm256_and_si256(c[3], bit7), 1)),
                            3));
      // Quads 0-3 then 4-7, each half's int16 sum widened once.
      auto half_sum = [&](const int8_t* xh, __m256i qa, __m256i qb, __m256i qc, __m256i qd) {
        const __m256i s16 =
            _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(qa, BroadcastQuad(xh)),
                                              _mm256_maddubs_epi16(qb, BroadcastQuad(xh + 4))),
                             _mm256_add_epi16(_mm256_maddubs_epi16(qc, BroadcastQuad(xh + 8)),
                                              _mm256_maddubs_epi16(qd, BroadcastQuad(xh + 12))));
        return _mm256_madd_epi16(s16, ones);
      };
      for (int r = 0; r < kR; ++r) {
        const int8_t* xr = xq[r] + col0 + gc;
        acc[r][v] = _mm256_add_epi32(
            acc[r][v], half_sum(xr, _mm256_and_si256(c[0], low5), _mm256_and_si256(c[1], low5),
                                _mm256_and_si256(c[2], low5), _mm256_and_si256(c[3], low5)));
        acc[r][v] = _mm256_add_epi32(acc[r][v],
                                     half_sum(xr + 16, _mm256_and_si256(c[4], low5), q5, q6, q7));
      }
    }
  } else {
    static_assert(T == GgmlType::kQ6_K);
    // Q6_K: a group is 16 columns, three carrier quads (quant_panels.h). A pair sum reaches
    // 2 · 63 · 127, so two add up in int16 (≤ 32004).
    const __m256i low6 = _mm256_set1_epi8(0x3F), top2 = _mm256_set1_epi8(static_cast<char>(0xC0));
    for (int v = 0; v < kV; ++v) {
      PrefetchPart<kV>(ahead, v);
      const uint8_t* base = blk + l.nibbles + 3 * g * kQuadBytes + (v0 + v) * 32;
      const __m256i c0 = LoadBytes(base), c1 = LoadBytes(base + kQuadBytes),
                    c2 = LoadBytes(base + 2 * kQuadBytes);
      const __m256i q0 = _mm256_and_si256(c0, low6), q1 = _mm256_and_si256(c1, low6),
                    q2 = _mm256_and_si256(c2, low6);
      // Quad 3: each carrier's top two bits, shifted down to bits 0-1, 2-3 and 4-5.
      const __m256i q3 =
          _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(c0, top2), 6),
                          _mm256_or_si256(_mm256_srli_epi16(_mm256_and_si256(c1, top2), 4),
                                          _mm256_srli_epi16(_mm256_and_si256(c2, top2), 2)));
      for (int r = 0; r < kR; ++r) {
        const int8_t* xr = xq[r] + col0 + gc;
        const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(q0, BroadcastQuad(xr)),
                                             _mm256_maddubs_epi16(q1, BroadcastQuad(xr + 4)));
        const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(q2, BroadcastQuad(xr + 8)),
                                             _mm256_maddubs_epi16(q3, BroadcastQuad(xr + 12)));
        acc[r][v] = _mm256_add_epi32(acc[r][v], _mm256_add_epi32(_mm256_madd_epi16(p01, ones),
                                                                 _mm256_madd_epi16(p23, ones)));
      }
    }
  }
}

// The float steps of one group for kR rows and the 8 outputs of vector v: y = fma(scale · d(g),
// isum, y), then y = fma(offset, d(g) · Σ qx, y). Every tile shape runs exactly these.
template <GgmlType T, int kR>
HWY_INLINE void GroupEpilogue(const QuantizedActivations& a, int64_t r0, const uint8_t* blk,
                              const BlockFactors<T>& bf, int64_t g, int64_t col, int v,
                              const __m256i (&isums)[kR], float* HWY_RESTRICT out) {
  constexpr QuantPanelFormat f = Int8Traits<T>::kFormat;
  const int64_t groups32 = a.cols / 32, groups16 = a.cols / 16;
  __m256 s, o = _mm256_setzero_ps();
  Scales<T>(blk, bf, g, v * 8, s, o);
  for (int r = 0; r < kR; ++r) {
    const int64_t row = r0 + r;
    __m256i isum = isums[r];
    if constexpr (f.q_offset != 0) {  // Σ (q − off) · qx = Σ q · qx − off · Σ qx
      int32_t sx = a.sum16[row * groups16 + col / 16];
      if (f.group_cols == 32) sx += a.sum16[row * groups16 + col / 16 + 1];
      isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(f.q_offset * sx));
    }
    const __m256 factor = _mm256_mul_ps(s, _mm256_set1_ps(a.d[row * groups32 + col / 32]));
    float* y = out + r * kPanel + v * 8;
    __m256 acc_y = _mm256_fmadd_ps(factor, _mm256_cvtepi32_ps(isum), _mm256_loadu_ps(y));
    if constexpr (f.has_offset)
      acc_y = _mm256_fmadd_ps(o, _mm256_set1_ps(a.dsum[row * groups32 + col / 32]), acc_y);
    _mm256_storeu_ps(y, acc_y);
  }
}

// kR input rows from r0 against vectors v0..v0 + kV of one panel, in the fixed order of
// linear_quant_int8.h; out[r][slot] accumulates (row stride kPanel).
template <GgmlType T, int kR, int kV>
HWY_INLINE void Int8Tile(const QuantizedActivations& a, int64_t r0,
                         const uint8_t* HWY_RESTRICT panel, int v0, float* HWY_RESTRICT out) {
  constexpr QuantPanelFormat f = Int8Traits<T>::kFormat;
  constexpr int64_t kGroups = f.block_cols / f.group_cols;
  const int64_t k = a.cols;
  const int8_t* xq[kR];
  for (int r = 0; r < kR; ++r) xq[r] = a.q.data() + (r0 + r) * k;
  for (int64_t b = 0; b < k / f.block_cols; ++b) {
    const uint8_t* blk = panel + b * f.block_bytes;
    const int64_t col0 = b * f.block_cols;
    BlockFactors<T> bf[kV];
    for (int v = 0; v < kV; ++v) bf[v] = LoadBlockFactors<T>(blk, (v0 + v) * 8);
    for (int64_t g = 0; g < kGroups; ++g) {
      __m256i acc[kR][kV];
      for (int r = 0; r < kR; ++r)
        for (int v = 0; v < kV; ++v) acc[r][v] = _mm256_setzero_si256();
      GroupDots<T, kR, kV>(blk, g, v0, xq, col0, acc);
      for (int v = 0; v < kV; ++v) {
        __m256i isums[kR];
        for (int r = 0; r < kR; ++r) isums[r] = acc[r][v];
        GroupEpilogue<T, kR>(a, r0, blk, bf[v], g, col0 + g * f.group_cols, v0 + v, isums, out);
      }
    }
  }
}

// One row (decode) against a whole panel: block by block, group by group, all 64 outputs at once
// so that the panel is read front to back (slices of a block's rows would leave the hardware
// prefetcher a strided pattern). Each group prefetches its proportional share of the panel
// kAhead bytes on, spread over the group's steps.
template <GgmlType T>
HWY_INLINE void Int8Row(const QuantizedActivations& a, int64_t row,
                        const uint8_t* HWY_RESTRICT panel, float* HWY_RESTRICT out) {
  constexpr QuantPanelFormat f = Int8Traits<T>::kFormat;
  constexpr int64_t kGroups = f.block_cols / f.group_cols;
  constexpr int64_t kShare = f.block_bytes / kGroups;
  constexpr int64_t kAhead = 8192;  // bytes; 2–8 KiB measured within noise, 8 KiB best for Q6_K
  const int8_t* const xq[1] = {a.q.data() + row * a.cols};
  for (int64_t b = 0; b < a.cols / f.block_cols; ++b) {
    const uint8_t* blk = panel + b * f.block_bytes;
    const int64_t col0 = b * f.block_cols;
    for (int64_t g = 0; g < kGroups; ++g) {
      const Ahead ahead{reinterpret_cast<const char*>(blk) + kAhead + g * kShare, kShare};
      __m256i acc[1][kVectors];
      for (int v = 0; v < kVectors; ++v) acc[0][v] = _mm256_setzero_si256();
      GroupDots<T, 1, kVectors>(blk, g, 0, xq, col0, acc, ahead);
      for (int v = 0; v < kVectors; ++v) {
        const __m256i isums[1] = {acc[0][v]};
        const BlockFactors<T> bf = LoadBlockFactors<T>(blk, v * 8);
        GroupEpilogue<T, 1>(a, row, blk, bf, g, col0 + g * f.group_cols, v, isums, out);
      }
    }
  }
}

// Rows share each weight load four at a time (prefill) in slices of two vectors; a single row
// (decode) takes Int8Row's order.
constexpr int kTileRows = 4;
constexpr int kTileVectors = 2;

template <GgmlType T>
void Int8Panel(const QuantizedActivations& a, int64_t r0, int64_t rows, const PackedMatrix& w,
               int64_t p, const uint8_t* panel, float* y) {
  int64_t m0 = 0;
  for (; m0 + kTileRows <= rows; m0 += kTileRows) {
    alignas(32) float out[kTileRows][kPanel] = {};
    for (int v0 = 0; v0 < kVectors; v0 += kTileVectors)
      Int8Tile<T, kTileRows, kTileVectors>(a, r0 + m0, panel, v0, &out[0][0]);
    store_panel(w, p, &out[0][0], kTileRows, r0 + m0, y);
  }
  for (; m0 < rows; ++m0) {
    alignas(32) float out[1][kPanel] = {};
    Int8Row<T>(a, r0 + m0, panel, &out[0][0]);
    store_panel(w, p, &out[0][0], 1, r0 + m0, y);
  }
}

using Int8PanelFn = void (*)(const QuantizedActivations&, int64_t, int64_t, const PackedMatrix&,
                             int64_t, const uint8_t*, float*);

// The panel routine of a block type; null for types packing never lays out for this kernel.
Int8PanelFn int8_panel_fn(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return &Int8Panel<GgmlType::kQ8_0>;
    case GgmlType::kQ4_0:
      return &Int8Panel<GgmlType::kQ4_0>;
    case GgmlType::kQ4_1:
      return &Int8Panel<GgmlType::kQ4_1>;
    case GgmlType::kQ5_0:
      return &Int8Panel<GgmlType::kQ5_0>;
    case GgmlType::kQ5_1:
      return &Int8Panel<GgmlType::kQ5_1>;
    case GgmlType::kQ4_K:
      return &Int8Panel<GgmlType::kQ4_K>;
    case GgmlType::kQ5_K:
      return &Int8Panel<GgmlType::kQ5_K>;
    case GgmlType::kQ6_K:
      return &Int8Panel<GgmlType::kQ6_K>;
    default:
      return nullptr;
  }
}

bool Int8Supported() {
  return true;
}

HWY_INLINE float MaxLane(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
HWY_INLINE int32_t SumLanes(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  return _mm_cvtsi128_si32(h);
}

// quantize_activations, 32 columns per step. The same values as the scalar definition in
// linear_quant_int8.h: max is exact, d and 1/d are the same scalar divisions, the product x · (1/d)
// the same f32 multiply and vcvtps2dq rounds it to nearest even, as lrint does.
void QuantizeActivationsImpl(const float* x, int64_t m, int64_t k, QuantizedActivations& out) {
  const int64_t groups = k / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lim = _mm256_set1_epi32(127), neg_lim = _mm256_set1_epi32(-127);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane split
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * k + g * 32;
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xg + 8 * i);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
      }
      const float mx = MaxLane(amax);
      const float d = mx / 127.0f;
      const __m256 inv = _mm256_set1_ps(mx > 0.0f ? 127.0f / mx : 0.0f);
      __m256i q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv)), lim),
                                neg_lim);
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + r * k + g * 32), bytes);
      const size_t at = static_cast<size_t>(r * groups + g);
      const int32_t s0 = SumLanes(_mm256_add_epi32(q[0], q[1]));
      const int32_t s1 = SumLanes(_mm256_add_epi32(q[2], q[3]));
      out.d[at] = d;
      out.sum16[2 * at] = s0;
      out.sum16[2 * at + 1] = s1;
      out.dsum[at] = d * static_cast<float>(s0 + s1);
    }
  }
}

void LinearQuantInt8Impl(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  thread_local QuantizedActivations rounded;
  quantize_activations(x, m, w.cols(), rounded);
  const QuantizedActivations& a =
      rounded;  // the caller's copy: thread_local names differ per thread
  const auto* base = static_cast<const uint8_t*>(w.data());
  // Threads split panels and, for prefill, blocks of rows, as the f32 kernel does (results do not
  // depend on the split). Integer products cost about a quarter of the f32 kernel's decoding, so
  // the parallel region pays from a larger product.
  const bool parallel = m * w.outputs() * w.cols() >= (int64_t{1} << 19);
  constexpr int64_t kRowBlock = 64;
  const int64_t block_rows = m >= 8 ? kRowBlock : m;
  const int64_t row_blocks = (m + block_rows - 1) / block_rows;
  const int64_t tasks = w.panels() * row_blocks;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t p = task / row_blocks, r0 = task % row_blocks * block_rows;
    const PackedMatrix::QuantPanel& qp = w.quant_panels()[static_cast<size_t>(p)];
    if (const Int8PanelFn fn = int8_panel_fn(qp.type))
      fn(a, r0, std::min(block_rows, m - r0), w, p, base + qp.offset, y);
  }
}

#else  // no AVX2: the kernel does not exist here and packing never asks for it

bool Int8Supported() {
  return false;
}

// The definition the AVX2 version follows (linear_quant_int8.h), for tests on any CPU.
void QuantizeActivationsImpl(const float* x, int64_t m, int64_t k, QuantizedActivations& out) {
  const int64_t groups = k / 32;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * k + g * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xg[i]));
      const float d = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t* q = out.q.data() + r * k + g * 32;
      int32_t sums[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const long v = std::lrint(xg[i] * inv);  // ties to even
        q[i] = static_cast<int8_t>(std::clamp(v, -127L, 127L));
        sums[i / 16] += q[i];
      }
      const size_t at = static_cast<size_t>(r * groups + g);
      out.d[at] = d;
      out.sum16[2 * at] = sums[0];
      out.sum16[2 * at + 1] = sums[1];
      out.dsum[at] = d * static_cast<float>(sums[0] + sums[1]);
    }
  }
}

void LinearQuantInt8Impl(const float*, int64_t, const PackedMatrix&, float*) {
  HWY_ABORT(
      "the int8-activation kernel needs AVX2; PackedMatrix never lays a matrix out for it "
      "on this CPU");
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {
HWY_EXPORT(LinearQuantInt8Impl);
HWY_EXPORT(Int8Supported);
HWY_EXPORT(QuantizeActivationsImpl);

bool linear_quant_int8_supported() {
  static const bool supported = HWY_DYNAMIC_DISPATCH(Int8Supported)();
  return supported;
}

void linear_quant_int8(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  if (m <= 0 || w.empty()) return;
  HWY_DYNAMIC_DISPATCH(LinearQuantInt8Impl)(x, m, w, y);
}

void quantize_activations(const float* x, int64_t m, int64_t k, QuantizedActivations& out) {
  out.rows = m;
  out.cols = k;
  out.q.resize(static_cast<size_t>(m * k));
  out.d.resize(static_cast<size_t>(m * (k / 32)));
  out.sum16.resize(2 * out.d.size());
  out.dsum.resize(out.d.size());
  HWY_DYNAMIC_DISPATCH(QuantizeActivationsImpl)(x, m, k, out);
}

}  // namespace rlt::kernels
#endif  // HWY_ONCE
