// Highway dynamic dispatch: this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_quant.cpp"
#include "kernels/cpu/linear_quant.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/panel_lanes-inl.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/row_count-inl.h"
#include "kernels/cpu/stream_prefetch.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using quant::GgmlType;

using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using DI8 = hn::Rebind<int8_t, DF>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// Input rows sharing each decoded weight vector. Decoding (unpacking, converting) costs more
// than the multiply-adds it feeds, so prefill takes as many rows as the registers allow.
#if HWY_TARGET <= HWY_AVX3
constexpr int kRowsTile = 8;
#else
constexpr int kRowsTile = 2;
#endif
// Vectors of a panel row one pass keeps in accumulators (inner and y per row and vector). One row
// (decode) takes the whole panel, so each panel is streamed from memory once (a second pass over
// half-used cache lines cost a third of the bandwidth); y spills to the stack at worst, touched
// once per group. Several rows take two vectors, so the decoded weights and broadcasts fit too.
template <int kRows>
constexpr int SliceVectors() {
  constexpr int want = kRows == 1 ? 8 : kRows <= 4 ? 2 : 1;
  return kVectors < want ? kVectors : want;
}

// A type's panel format (quant_panels.h) as compile-time constants.
template <GgmlType T>
struct Traits {
  static constexpr QuantPanelFormat kFormat = *quant_panel_format(T);
  static constexpr QuantBlockLayout kLayout = quant_block_layout(kFormat);
  static constexpr int kBits = kFormat.quant_bits;
  static constexpr int kQOffset = kFormat.q_offset;
  static constexpr bool kHasOffset = kFormat.has_offset;
  static constexpr int64_t kBlockCols = kFormat.block_cols;
  static constexpr int64_t kGroupCols = kFormat.group_cols;
  static constexpr int64_t kBlockBytes = kFormat.block_bytes;
};

// The column octet holding column c of a 4-bit block (quant_panels.h) for the kLanes outputs from
// L: each output's 8 columns in its 32-bit lane, so the load needs no widening (on Zen 4 the
// byte-to-dword widening it replaced was the costliest step of decoding).
template <GgmlType T>
HWY_INLINE hn::Vec<DU> OctetLanes(const uint8_t* HWY_RESTRICT blk, int64_t c, int64_t L) {
  const DU du;
  const auto* octet = blk + Traits<T>::kLayout.nibbles + (c / 8) * 4 * kPanel;
  return hn::LoadU(du, reinterpret_cast<const uint32_t*>(octet) + L);
}

// Columns c and c + 1 (c even) out of their octet's lanes, as f32: column c is the nibble at bit
// 8 (c % 4) + 4 (c % 8 / 4), column c + 1 the one a byte above.
template <GgmlType T>
HWY_INLINE void DecodeOctetPair(hn::Vec<DU> lanes, int64_t c, VF& q0, VF& q1) {
  const DF df;
  const DI di;
  const DU du;
  using Tr = Traits<T>;
  const int shift0 = static_cast<int>(8 * (c % 4) + 4 * (c % 8 / 4));
  const auto b0 = hn::ShiftRightSame(lanes, shift0);
  const auto b1 = hn::ShiftRightSame(lanes, shift0 + 8);
#if HWY_TARGET <= HWY_AVX3
  if constexpr (kLanes == 16) {
    // vpermps reads only the low 4 bits of each index: a nibble picks its own f32 value (the
    // offset included) from a 16-lane table, with no mask, offset or conversion (one shuffle
    // instead of a mask, a convert and a subtract; the same values, so the same bits).
    const VF table = hn::Iota(df, -Tr::kQOffset);
    q0 = VF{_mm512_permutexvar_ps(b0.raw, table.raw)};
    q1 = VF{_mm512_permutexvar_ps(b1.raw, table.raw)};
    return;
  }
#endif
  const auto offset = hn::Set(di, Tr::kQOffset);
  q0 = hn::ConvertTo(df, hn::Sub(hn::BitCast(di, hn::And(b0, hn::Set(du, 15u))), offset));
  q1 = hn::ConvertTo(df, hn::Sub(hn::BitCast(di, hn::And(b1, hn::Set(du, 15u))), offset));
}

// The quants of columns c and c + 1 (c even) of a block, for the kLanes outputs from L, as f32
// (exact: small integers).
template <GgmlType T>
HWY_INLINE void DecodePair(const uint8_t* HWY_RESTRICT blk, int64_t c, int64_t L, VF& q0, VF& q1) {
  const DF df;
  const DI di;
  using Tr = Traits<T>;
  constexpr QuantBlockLayout l = Tr::kLayout;
  if constexpr (Tr::kBits == 8) {
    const DI8 di8;
    const auto* p = reinterpret_cast<const int8_t*>(blk + l.bytes8 + c * kPanel + L);
    auto i0 = hn::PromoteTo(di, hn::LoadU(di8, p));
    auto i1 = hn::PromoteTo(di, hn::LoadU(di8, p + kPanel));
    if constexpr (Tr::kQOffset != 0) {
      i0 = hn::Sub(i0, hn::Set(di, Tr::kQOffset));
      i1 = hn::Sub(i1, hn::Set(di, Tr::kQOffset));
    }
    q0 = hn::ConvertTo(df, i0);
    q1 = hn::ConvertTo(df, i1);
  } else {
    static_assert(Tr::kBits == 4, "5- and 6-bit quants are packed fields (FieldQuant)");
    DecodeOctetPair<T>(OctetLanes<T>(blk, c, L), c, q0, q1);
  }
}

// The 5- and 6-bit K-quants are packed fields (quant_panels.h): column j of a group (Q5_K 32
// columns, Q6_K 16) is bits b·j .. b·j + b − 1 of its output's 5 (Q6_K 3) group dwords. Each
// column is then at most a shift or two from a whole value in its output's 32-bit lane, one
// vector at a time; the two planes they replaced (nibbles, high bits) took a dozen operations
// per column pair to assemble, or on AVX-512 a bytewise assembly for the whole panel and a
// shuffle and a conversion per vector, which made their GEMV compute-bound and a tile of
// several rows twice as slow.
template <GgmlType T>
constexpr bool kPackedFields = T == GgmlType::kQ5_K || T == GgmlType::kQ6_K;
// Dwords per output in a group of packed fields.
template <GgmlType T>
constexpr int64_t kFieldDwords = (Traits<T>::kGroupCols * Traits<T>::kBits) / 32;

// The first dword row of group g (of the block at blk) of a type with packed fields.
template <GgmlType T>
HWY_INLINE const uint8_t* FieldGroup(const uint8_t* HWY_RESTRICT blk, int64_t g) {
  return blk + Traits<T>::kLayout.nibbles + g * kFieldDwords<T> * 4 * kPanel;
}

// A Q5_K field's quant (bits 0..4 of each lane) as f32, exactly.
HWY_INLINE VF FieldValue(hn::Vec<DU> field) {
  const DF df;
#if HWY_TARGET <= HWY_AVX3
  if constexpr (kLanes == 16) {
    // vpermi2ps reads only the low 5 bits of each index: the field picks its own value from a
    // 32-entry table, with no mask and no conversion (the same values, so the same bits).
    return VF{_mm512_permutex2var_ps(hn::Iota(df, 0).raw, field.raw, hn::Iota(df, 16).raw)};
  }
#endif
  const DI di;
  return hn::ConvertTo(df, hn::BitCast(di, hn::And(field, hn::Set(DU(), 31u))));
}

// Column kJ of the packed group at `group` (its first dword row) for the kLanes outputs from L,
// as f32, exactly.
template <GgmlType T, int kJ>
HWY_INLINE VF FieldQuant(const uint8_t* HWY_RESTRICT group, int64_t L) {
  constexpr int kBits = Traits<T>::kBits;
  constexpr int kDword = kBits * kJ / 32, kShift = kBits * kJ % 32;
  constexpr bool kSpans = kShift + kBits > 32;  // the field runs into the next dword
  // Q6_K keeps a field that sits at bit 17 or below where it is (see below); every other field
  // is brought to bit 0, with the bits above it other columns'.
  constexpr int kAt = kBits == 6 && !kSpans && kShift <= 23 - kBits ? kShift : 0;
  const DU du;
  const auto* dwords = reinterpret_cast<const uint32_t*>(group) + L;
  const auto lo = hn::LoadU(du, dwords + kDword * kPanel);
  hn::Vec<DU> lane = lo;
  if constexpr (kSpans) {
    const auto hi = hn::LoadU(du, dwords + (kDword + 1) * kPanel);
    lane = hn::Or(hn::ShiftRight<kShift>(lo), hn::ShiftLeft<32 - kShift>(hi));
  } else if constexpr (kAt != kShift) {
    lane = hn::ShiftRight<kShift>(lo);
  }
  if constexpr (kBits == 5) {
    return FieldValue(lane);  // ignores the bits above the field
  } else {
    // Q6_K: the field at bit kAt ≤ 17 becomes the mantissa of a float of exponent 23 − kAt,
    // which is then 2^(23 − kAt) + q exactly; subtracting 2^(23 − kAt) + 32 leaves q − 32
    // exactly (both within a factor of 2). Two operations (vpternlogd, vsubps) instead of a
    // shift to the top, an arithmetic shift back and a conversion.
    static_assert(kBits == 6);
    const DF df;
    const auto exponent = hn::Set(du, static_cast<uint32_t>(127 + 23 - kAt) << 23);
    const auto mantissa = hn::OrAnd(exponent, lane, hn::Set(du, uint32_t{63} << kAt));
    return hn::Sub(hn::BitCast(df, mantissa),
                   hn::Set(df, static_cast<float>((1 << (23 - kAt)) + 32)));
  }
}

// f(std::integral_constant<int, j>) for the first column j of each pair of a group of kCols,
// in order: the fields' shifts become immediates.
template <int kCols, class F>
HWY_INLINE void ForEachColumnPair(F&& f) {
  [&]<int... kPair>(std::integer_sequence<int, kPair...>) HWY_ATTR {
    (f(std::integral_constant<int, 2 * kPair>{}), ...);
  }
  (std::make_integer_sequence<int, kCols / 2>{});
}

// Group g's scale and offset for the kLanes outputs from L, computed as ggml's dequantization
// does (d · sc rounded once, the offset −(dmin · m) likewise).
template <GgmlType T>
HWY_INLINE void GroupScale(const uint8_t* HWY_RESTRICT blk, int64_t g, int64_t L, VF& s, VF& o) {
  const DF df;
  const DH dh;
  const DI di;
  const DU du;
  const DU8 du8;
  using Tr = Traits<T>;
  constexpr QuantBlockLayout l = Tr::kLayout;
  const VF d =
      hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(blk + l.d) + L));
  if constexpr (Tr::kBlockCols == 32) {
    s = d;
    if constexpr (Tr::kHasOffset)
      o = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(blk + l.m) + L));
  } else if constexpr (T == GgmlType::kQ6_K) {
    const DI8 di8;
    const auto* sc = reinterpret_cast<const int8_t*>(blk + l.scales + g * kPanel + L);
    s = hn::Mul(d, hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, sc))));
  } else {
    const auto sc = hn::PromoteTo(du, hn::LoadU(du8, blk + l.scales + g * kPanel + L));
    const auto mn = hn::PromoteTo(du, hn::LoadU(du8, blk + l.mins + g * kPanel + L));
    const VF dmin =
        hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(blk + l.m) + L));
    s = hn::Mul(d, hn::ConvertTo(df, hn::BitCast(di, sc)));
    o = hn::Neg(hn::Mul(dmin, hn::ConvertTo(df, hn::BitCast(di, mn))));
  }
}

// One panel against kRows input rows (x + r * k), in the fixed order of linear_quant.h; with
// kParts > 1 only part `part` of the panel's outputs (out's other lanes are left as they are).
// Every output's sum is the same whichever part computes it. xsum: each row's group sums (row
// stride `groups`), for types with an offset.
template <GgmlType T, int kRows, int kParts = 1>
HWY_INLINE void QuantTile(const float* HWY_RESTRICT x, int64_t k, const float* HWY_RESTRICT xsum,
                          int64_t groups, const uint8_t* HWY_RESTRICT panel, int part,
                          float (&out)[kRows][kPanel]) {
  using Tr = Traits<T>;
  static_assert(kVectors % kParts == 0);
  constexpr int kPartVectors = kVectors / kParts;
  constexpr int kWant = SliceVectors<kRows>();
  constexpr int kSlice = kWant < kPartVectors ? kWant : kPartVectors;
  constexpr int64_t kGroupsPerBlock = Tr::kBlockCols / Tr::kGroupCols;
  const DF df;
  const int64_t blocks = k / Tr::kBlockCols;
  const int first_slice = part * kPartVectors;
  for (int slice = first_slice; slice < first_slice + kPartVectors; slice += kSlice) {
    VF y[kRows][kSlice];
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kSlice; ++v) y[r][v] = hn::Zero(df);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = panel + b * Tr::kBlockBytes;
      const int64_t col0 = b * Tr::kBlockCols;
      for (int64_t g = 0; g < kGroupsPerBlock; ++g) {
        VF inner[kRows][kSlice];
        for (int r = 0; r < kRows; ++r)
          for (int v = 0; v < kSlice; ++v) inner[r][v] = hn::Zero(df);
        // Columns c and c + 1 of the group for the slice, decode(v, q0, q1) giving the quants.
        auto pair = [&](int64_t c, auto&& decode) HWY_ATTR {
          if (slice == first_slice) {
            // The first slice's pass moves through the block at its average rate per column pair
            // (a part of a panel asks for the other parts' lines too: only a panel split between
            // threads is computed in parts, at most one per thread).
            constexpr int64_t kPerPair = Tr::kBlockBytes * 2 / Tr::kBlockCols;
            const char* ahead =
                reinterpret_cast<const char*>(blk) + c / 2 * kPerPair + kPrefetchBytes;
            for (int64_t line = 0; line < kPerPair; line += 64) {
              __builtin_prefetch(ahead + kL2AheadBytes + line, 0, 2);
              __builtin_prefetch(ahead + line);
            }
          }
          VF x0[kRows], x1[kRows];
          for (int r = 0; r < kRows; ++r) {
            x0[r] = hn::Set(df, x[r * k + col0 + c]);
            x1[r] = hn::Set(df, x[r * k + col0 + c + 1]);
          }
          decode([&](int v, VF q0, VF q1) HWY_ATTR {
            for (int r = 0; r < kRows; ++r) {
              inner[r][v] = hn::MulAdd(x0[r], q0, inner[r][v]);
              inner[r][v] = hn::MulAdd(x1[r], q1, inner[r][v]);
            }
          });
        };
        const int64_t c_end = (g + 1) * Tr::kGroupCols;
        if constexpr (Tr::kBits == 4) {
          // An octet's lanes are loaded once for its four pairs; unrolled, the shifts are
          // immediates.
          for (int64_t c8 = g * Tr::kGroupCols; c8 < c_end; c8 += 8) {
            hn::Vec<DU> octet[kSlice];
            for (int v = 0; v < kSlice; ++v)
              octet[v] = OctetLanes<T>(blk, c8, (slice + v) * kLanes);
#pragma GCC unroll 4
            for (int64_t c = c8; c < c8 + 8; c += 2) {
              pair(c, [&](auto&& accumulate) HWY_ATTR {
                for (int v = 0; v < kSlice; ++v) {
                  VF q0, q1;
                  DecodeOctetPair<T>(octet[v], c, q0, q1);
                  accumulate(v, q0, q1);
                }
              });
            }
          }
        } else if constexpr (kPackedFields<T>) {
          const uint8_t* group = FieldGroup<T>(blk, g);
          ForEachColumnPair<Tr::kGroupCols>([&](auto j) HWY_ATTR {
            pair(g * Tr::kGroupCols + j.value, [&](auto&& accumulate) HWY_ATTR {
              for (int v = 0; v < kSlice; ++v) {
                const int64_t L = (slice + v) * kLanes;
                accumulate(v, FieldQuant<T, j.value>(group, L),
                           FieldQuant<T, j.value + 1>(group, L));
              }
            });
          });
        } else {
          for (int64_t c = g * Tr::kGroupCols; c < c_end; c += 2) {
            pair(c, [&](auto&& accumulate) HWY_ATTR {
              for (int v = 0; v < kSlice; ++v) {
                VF q0, q1;
                DecodePair<T>(blk, c, (slice + v) * kLanes, q0, q1);
                accumulate(v, q0, q1);
              }
            });
          }
        }
        for (int v = 0; v < kSlice; ++v) {
          VF s, o;
          GroupScale<T>(blk, g, (slice + v) * kLanes, s, o);
          for (int r = 0; r < kRows; ++r) {
            y[r][v] = hn::MulAdd(s, inner[r][v], y[r][v]);
            if constexpr (Tr::kHasOffset)
              y[r][v] =
                  hn::MulAdd(o, hn::Set(df, xsum[r * groups + b * kGroupsPerBlock + g]), y[r][v]);
          }
        }
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int v = 0; v < kSlice; ++v) hn::StoreU(y[r][v], df, out[r] + (slice + v) * kLanes);
  }
}

// Prefill: the panel's quants and group scales are expanded to f32 once per chunk of 64 columns
// (16 KiB: the row tiles then read it from L1) and every row tile reads them from there, so
// decoding is paid once per weight instead of once per row tile. The arithmetic is the decode
// path's, term for term (the same f32 values in the same order; y carried between chunks in
// memory), so a row's result does not depend on which path the batch size picked.
constexpr int64_t kChunkCols = 64;
#if HWY_TARGET <= HWY_AVX3
constexpr int kExpandedRows = 6;  // 24 accumulators of 16 lanes + 6 broadcasts
constexpr int kExpandedSlice = kVectors < 4 ? kVectors : 4;
#else
// 16 registers: 3 rows x 4 vectors of accumulators, 3 broadcasts, the weights (each weight load
// feeds 3 multiply-adds, so the loads keep pace with the FMA units).
constexpr int kExpandedRows = 3;
constexpr int kExpandedSlice = kVectors < 4 ? kVectors : 4;
#endif

struct Expanded {
  std::vector<float> q;       // [column][64]
  std::vector<float> scale;   // [group][64]
  std::vector<float> offset;  // [group][64]
  std::vector<float> y;       // [row][64]: the outputs carried from chunk to chunk
};

// Columns col0 .. col0 + cols (whole groups, inside one block or whole blocks) expanded.
template <GgmlType T>
void ExpandChunk(const uint8_t* panel, int64_t col0, int64_t cols, Expanded& e) {
  using Tr = Traits<T>;
  const DF df;
  const auto store = [&](int64_t i, const VF(&q0)[kVectors], const VF(&q1)[kVectors]) HWY_ATTR {
    for (int v = 0; v < kVectors; ++v) {
      hn::StoreU(q0[v], df, e.q.data() + i * kPanel + v * kLanes);
      hn::StoreU(q1[v], df, e.q.data() + (i + 1) * kPanel + v * kLanes);
    }
  };
  for (int64_t i = 0; i < cols; i += kPackedFields<T> ? Tr::kGroupCols : 2) {
    const int64_t col = col0 + i;
    const uint8_t* blk = panel + col / Tr::kBlockCols * Tr::kBlockBytes;
    if constexpr (kPackedFields<T>) {
      const uint8_t* group = FieldGroup<T>(blk, col % Tr::kBlockCols / Tr::kGroupCols);
      ForEachColumnPair<Tr::kGroupCols>([&](auto j) HWY_ATTR {
        VF q0[kVectors], q1[kVectors];
        for (int v = 0; v < kVectors; ++v) {
          q0[v] = FieldQuant<T, j.value>(group, v * kLanes);
          q1[v] = FieldQuant<T, j.value + 1>(group, v * kLanes);
        }
        store(i + j.value, q0, q1);
      });
    } else {
      VF q0[kVectors], q1[kVectors];
      for (int v = 0; v < kVectors; ++v)
        DecodePair<T>(blk, col % Tr::kBlockCols, v * kLanes, q0[v], q1[v]);
      store(i, q0, q1);
    }
  }
  for (int64_t i = 0; i < cols; i += Tr::kGroupCols) {
    const int64_t col = col0 + i;
    const uint8_t* blk = panel + col / Tr::kBlockCols * Tr::kBlockBytes;
    const int64_t g = col % Tr::kBlockCols / Tr::kGroupCols, gi = i / Tr::kGroupCols;
    for (int v = 0; v < kVectors; ++v) {
      VF s, o = hn::Zero(df);
      GroupScale<T>(blk, g, v * kLanes, s, o);
      hn::StoreU(s, df, e.scale.data() + gi * kPanel + v * kLanes);
      hn::StoreU(o, df, e.offset.data() + gi * kPanel + v * kLanes);
    }
  }
}

// kRows input rows (x + r * k) against an expanded chunk of `cols` columns starting at col0;
// y: the rows' outputs so far (row stride kPanel), updated in place.
template <GgmlType T, int kRows>
HWY_INLINE void ExpandedTile(const float* HWY_RESTRICT x, int64_t k, const float* HWY_RESTRICT xsum,
                             int64_t groups, const Expanded& e, int64_t col0, int64_t cols,
                             float* HWY_RESTRICT y) {
  using Tr = Traits<T>;
  const DF df;
  for (int slice = 0; slice < kVectors; slice += kExpandedSlice) {
    for (int64_t c = 0; c < cols; c += Tr::kGroupCols) {
      VF inner[kRows][kExpandedSlice];
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < kExpandedSlice; ++v) inner[r][v] = hn::Zero(df);
      for (int64_t i = c; i < c + Tr::kGroupCols; ++i) {
        const float* qi = e.q.data() + i * kPanel + slice * kLanes;
        for (int r = 0; r < kRows; ++r) {
          const VF xb = hn::Set(df, x[r * k + col0 + i]);
          for (int v = 0; v < kExpandedSlice; ++v)
            inner[r][v] = hn::MulAdd(xb, hn::LoadU(df, qi + v * kLanes), inner[r][v]);
        }
      }
      const int64_t g = c / Tr::kGroupCols;
      for (int v = 0; v < kExpandedSlice; ++v) {
        const int64_t lane = (slice + v) * kLanes;
        const VF s = hn::LoadU(df, e.scale.data() + g * kPanel + lane);
        for (int r = 0; r < kRows; ++r) {
          VF acc = hn::MulAdd(s, inner[r][v], hn::LoadU(df, y + r * kPanel + lane));
          if constexpr (Tr::kHasOffset) {
            const VF o = hn::LoadU(df, e.offset.data() + g * kPanel + lane);
            acc = hn::MulAdd(o, hn::Set(df, xsum[r * groups + (col0 + c) / 32]), acc);
          }
          hn::StoreU(acc, df, y + r * kPanel + lane);
        }
      }
    }
  }
}

// Batches from this many rows take the expanded path (identical results, see above).
constexpr int64_t kExpandFromRows = 20;

// Input rows m0 .. m0 + kRows of panel p (of its part `part` of kParts) through one tile, stored
// into y.
template <GgmlType T, int kRows, int kParts = 1>
HWY_INLINE void QuantRows(const float* x, int64_t k, const float* xsum, int64_t groups,
                          const PackedMatrix& w, int64_t p, const uint8_t* panel, int part,
                          int64_t m0, float* y) {
  float out[kRows][kPanel];
  QuantTile<T, kRows, kParts>(x + m0 * k, k, xsum + m0 * groups, groups, panel, part, out);
  constexpr int64_t kPartOutputs = kPanel / kParts;
  store_panel(w, p, &out[0][0], kRows, m0, y, part * kPartOutputs, (part + 1) * kPartOutputs);
}

// Tiles of kRowsTile rows, then one tile of the rest: every tile decodes the panel once, so a
// few rows (a decode step of a few requests, a speculative verification) cost one or two decodes
// instead of one per row.
template <GgmlType T, int kParts>
void QuantPanelTiles(const float* x, int64_t m, const PackedMatrix& w, int64_t p,
                     const uint8_t* panel, const float* xsum, int64_t groups, int part, float* y) {
  const int64_t k = w.cols();
  int64_t m0 = 0;
  for (; m0 + kRowsTile <= m; m0 += kRowsTile)
    QuantRows<T, kRowsTile, kParts>(x, k, xsum, groups, w, p, panel, part, m0, y);
  WithRowCount<1, kRowsTile - 1>(m - m0, [&](auto rows) HWY_ATTR {
    QuantRows<T, rows.value, kParts>(x, k, xsum, groups, w, p, panel, part, m0, y);
  });
}

template <GgmlType T>
void QuantPanel(const float* x, int64_t m, const PackedMatrix& w, int64_t p, const uint8_t* panel,
                const float* xsum, int64_t groups, float* y) {
  using Tr = Traits<T>;
  const int64_t k = w.cols();
  if (m >= kExpandFromRows) {
    thread_local Expanded e;
    const int64_t chunk = kChunkCols;  // a multiple of every group size; blocks hold whole chunks
    e.q.resize(static_cast<size_t>(chunk * kPanel));
    e.scale.resize(static_cast<size_t>(chunk / Tr::kGroupCols * kPanel));
    e.offset.resize(e.scale.size());
    e.y.assign(static_cast<size_t>(m * kPanel), 0.0f);
    for (int64_t col0 = 0; col0 < k; col0 += chunk) {
      const int64_t cols = std::min(chunk, k - col0);
      ExpandChunk<T>(panel, col0, cols, e);
      int64_t m0 = 0;
      for (; m0 + kExpandedRows <= m; m0 += kExpandedRows)
        ExpandedTile<T, kExpandedRows>(x + m0 * k, k, xsum + m0 * groups, groups, e, col0, cols,
                                       e.y.data() + m0 * kPanel);
      // The rows left over (a 64-row block leaves 4 on AVX-512) as one tile of that many: one
      // row at a time (4 multiply-adds per 5 loads) they cost as much as 12 rows.
      WithRowCount<1, kExpandedRows - 1>(m - m0, [&](auto rows) HWY_ATTR {
        ExpandedTile<T, rows.value>(x + m0 * k, k, xsum + m0 * groups, groups, e, col0, cols,
                                    e.y.data() + m0 * kPanel);
      });
    }
    store_panel(w, p, e.y.data(), static_cast<int>(m), 0, y);
    return;
  }
  QuantPanelTiles<T, 1>(x, m, w, p, panel, xsum, groups, 0, y);
}

using PanelFn = void (*)(const float*, int64_t, const PackedMatrix&, int64_t, const uint8_t*,
                         const float*, int64_t, float*);

using HalfPanelFn = void (*)(const float*, int64_t, const PackedMatrix&, int64_t, const uint8_t*,
                             const float*, int64_t, int, float*);

// pick(type as a compile-time constant) for a block type; null for types packing never admits.
template <class Pick>
auto ByType(GgmlType type, Pick pick) {
  using std::integral_constant;
  using Fn = decltype(pick(integral_constant<GgmlType, GgmlType::kQ8_0>{}));
  switch (type) {
    case GgmlType::kQ8_0:
      return pick(integral_constant<GgmlType, GgmlType::kQ8_0>{});
    case GgmlType::kQ4_0:
      return pick(integral_constant<GgmlType, GgmlType::kQ4_0>{});
    case GgmlType::kQ4_1:
      return pick(integral_constant<GgmlType, GgmlType::kQ4_1>{});
    case GgmlType::kQ5_0:
      return pick(integral_constant<GgmlType, GgmlType::kQ5_0>{});
    case GgmlType::kQ5_1:
      return pick(integral_constant<GgmlType, GgmlType::kQ5_1>{});
    case GgmlType::kQ4_K:
      return pick(integral_constant<GgmlType, GgmlType::kQ4_K>{});
    case GgmlType::kQ5_K:
      return pick(integral_constant<GgmlType, GgmlType::kQ5_K>{});
    case GgmlType::kQ6_K:
      return pick(integral_constant<GgmlType, GgmlType::kQ6_K>{});
    default:
      return Fn{nullptr};
  }
}

PanelFn panel_fn(GgmlType type) {
  return ByType(type, [](auto t) -> PanelFn { return &QuantPanel<decltype(t)::value>; });
}
HalfPanelFn half_panel_fn(GgmlType type) {
  // Half of a panel's outputs (part 0 or 1), for fewer rows than the expanded path takes.
  return ByType(type,
                [](auto t) -> HalfPanelFn { return &QuantPanelTiles<decltype(t)::value, 2>; });
}

void LinearQuantImpl(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  const int64_t k = w.cols();
  // Σ x over each group of 32 columns, in column order, once per input row: the offset terms'
  // factor (every type with an offset has groups of 32). Only matrices with such panels need it.
  const int64_t groups = k / 32;
  bool offsets = false;
  for (const PackedMatrix::QuantPanel& qp : w.quant_panels())
    offsets |= quant_panel_format(qp.type)->has_offset;
  thread_local std::vector<float> xsum;
  xsum.resize(static_cast<size_t>(m * groups));
  if (offsets) {
    float* out = xsum.data();  // the calling thread's buffer (xsum names each worker's own)
    parallel_rows(m, k, [&](int64_t r) {
      for (int64_t g = 0; g < groups; ++g) {
        float s = 0.0f;
        for (int64_t c = g * 32; c < (g + 1) * 32; ++c) s += x[r * k + c];
        out[r * groups + g] = s;
      }
    });
  }
  const float* sums = xsum.data();
  const auto* base = static_cast<const uint8_t*>(w.data());
  // As in linear.cpp threads split panels, and small products stay on one thread; decoding makes
  // a quantized weight cost several times a bf16 one, so the region pays from ~256k weights
  // (every matrix of SmolLM2-135M at one token: ~30 µs of work on one thread).
  const bool parallel = m * w.outputs() * k >= (int64_t{1} << 18);
  // Prefill splits rows as well as panels (blocks of kRowBlock rows): a matrix of few panels
  // (SmolLM2's 9 for 576 outputs) would otherwise leave a thread idle for a whole panel. Rows are
  // independent, so the split changes no result.
  constexpr int64_t kRowBlock = 64;
  const int64_t row_blocks = m >= kExpandFromRows ? (m + kRowBlock - 1) / kRowBlock : 1;
  const int64_t block_rows = m >= kExpandFromRows ? kRowBlock : m;
  const int64_t n = w.outputs();
  const int64_t panels = w.panels();
  // Decode and small batches on few panels (SmolLM2's 9 for 576 outputs: 5 against 4) leave a
  // thread idle for a whole panel at the end: there threads share the panels out by halves, the
  // one panel on a boundary computed half by each (outputs are independent: the same results).
  // SwiGLU panels pair a gate with its up half, and such matrices have many panels anyway.
  const int threads = parallel ? omp_get_max_threads() : 1;
  if (m < kExpandFromRows && threads > 1 && panels % threads != 0 && panels < 8 * threads &&
      w.epilogue() == PackedMatrix::Epilogue::kStore) {
#pragma omp parallel num_threads(threads)
    {
      // This thread's contiguous run of the 2 · panels halves (panel h / 2, part h % 2): a
      // panel is split only where a run starts or ends inside it.
      const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t begin = 2 * panels * t / team, end = 2 * panels * (t + 1) / team;
      for (int64_t h = begin; h < end;) {
        const int64_t p = h / 2;
        const PackedMatrix::QuantPanel& qp = w.quant_panels()[static_cast<size_t>(p)];
        const uint8_t* panel = base + qp.offset;
        if (h % 2 == 0 && h + 2 <= end) {  // a whole panel
          if (const PanelFn fn = panel_fn(qp.type)) fn(x, m, w, p, panel, sums, groups, y);
          h += 2;
        } else {
          if (const HalfPanelFn fn = half_panel_fn(qp.type))
            fn(x, m, w, p, panel, sums, groups, static_cast<int>(h % 2), y);
          h += 1;
        }
      }
    }
    return;
  }
  // Each thread takes a contiguous run of the (panel, row block) tasks and runs a panel's
  // consecutive blocks of its run as one call, so the panel is expanded once per thread (twice
  // only where two threads share its row blocks), not once per block.
  const int64_t tasks = panels * row_blocks;
#pragma omp parallel num_threads(threads) if (parallel)
  {
    const int64_t team = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = tasks * t / team, end = tasks * (t + 1) / team;
    for (int64_t task = begin; task < end;) {
      const int64_t p = task / row_blocks;
      const int64_t last = std::min(end, (p + 1) * row_blocks);  // one past this panel's last task
      const int64_t r0 = task % row_blocks * block_rows;
      const int64_t rows = std::min(m, (last - p * row_blocks) * block_rows) - r0;
      const PackedMatrix::QuantPanel& qp = w.quant_panels()[static_cast<size_t>(p)];
      if (const PanelFn fn = panel_fn(qp.type))
        fn(x + r0 * k, rows, w, p, base + qp.offset, sums + r0 * groups, groups, y + r0 * n);
      task = last;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {
HWY_EXPORT(LinearQuantImpl);

void linear_quant(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  if (m <= 0 || w.empty()) return;
  HWY_DYNAMIC_DISPATCH(LinearQuantImpl)(x, m, w, y);
}

}  // namespace rlt::kernels
#endif  // HWY_ONCE
