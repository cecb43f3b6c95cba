// cpu_flash: tiled online-softmax attention over paged K/V for the CPU.
//
// Work is split into tasks of (sequence, key range, query block, query heads). A task keeps, for
// each (query row, query head) pair, the running max m, the running sum l and an f32 accumulator,
// and walks its key range in tiles of kTile tokens: scores for the tile, one rescale per tile,
// exp, then V accumulated. A task normally covers every head, so it reads each token's K (and V)
// for all heads as one contiguous run: the pools are token-major, and per-head tasks would stride
// by heads x head_dim through memory, defeating the prefetchers; only when there are fewer tasks
// than threads is each split by heads. Long single-query contexts are split into kSplitTokens
// ranges whose partial states merge exactly (log-sum-exp) in a fixed order. Tile and split
// boundaries depend only on a row's own causal length: a packed row longer than kSplitTokens
// restarts its state at every range boundary and merges the ranges' states exactly as a split
// single-query row does, so a row's result is bit-identical whether it comes alone (decode), in a
// batch, or with other rows of its sequence (prefill, speculative verification) — the backend
// declares `deterministic`. Highway picks AVX-512 / AVX2 / SSE4 / NEON at run time; OpenMP runs
// tasks in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/cpu_flash.cpp"
// clang-format off: foreach_target.h re-includes this file per target and must come first.
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "attention/backend.h"
#include "kernels/cpu/stream_prefetch.h"
#include "kernels/cpu/widen-inl.h"
#include "kv/layer_view.h"

#ifndef RLT_ATTENTION_CPU_FLASH_SHARED_
#define RLT_ATTENTION_CPU_FLASH_SHARED_
namespace rlt::attention::flash {

constexpr int64_t kTile = 32;           // keys per online-softmax step
constexpr int64_t kSplitTokens = 256;   // single-query contexts longer than this are split
constexpr int64_t kQueryBlock = 16;     // packed-prefill query rows sharing each K/V load
constexpr int64_t kFewRows = 8;         // a sequence with at most this many rows: one task for all

struct Task {
  int64_t seq = 0;
  int64_t key_begin = 0, key_end = 0;  // keys this task covers
  int64_t row_begin = 0, row_end = 0;  // query rows (absolute row indices)
  int64_t split = -1;                  // >= 0: writes a partial state into slot `split`
  // Query heads covered (head_end -1: all). Heads are independent, so a task split by heads
  // gives the same bits; a lone short row is split this way to use more than one thread.
  int64_t head_begin = 0, head_end = -1;
};

// Per-thread buffers: grow to the largest task seen, then reused.
struct Scratch {
  std::vector<float> q, scores, acc, m, l;
  std::vector<float> zeros;  // a zero key of head_dim elements, for blocks past a tile's end
  std::vector<float> kstage, vstage;  // Q8_0 K/V off the blocked path: a token's heads dequantized
  std::vector<float> parts;  // packed rows past kSplitTokens: [range][pair][m, l, acc]
  // Pair-lane scoring: the task's queries with pairs in the lanes, a tile's keys widened.
  std::vector<float> qt, kw;
  std::vector<int64_t> by_head;      // the task's pair indices ordered by KV head
  std::vector<int64_t> heads;        // the KV heads they read, in order
  std::vector<int64_t> head_starts;  // where each head's pairs start in by_head (one past the end last)
};

// A head of Q8_0 K/V as the blocked paths read it in place: d / 32 GGML q8_0 blocks
// (kv::kQ8_0BlockBytes each). Only ever pointed to.
struct Q8_0Head;

// Merges `count` partial states {m, l, acc[d]} of one (row, head) pair, `stride` floats apart,
// in order, into out[d]: the one merge every split row goes through, alone or packed. Compiled
// once, never inlined into a SIMD target's code: there g++ may contract a*b + c into an FMA (the
// target pragmas do not keep ISO mode's -ffp-contract=off), and a merge inlined into one caller
// but not the other would round differently.
HWY_NOINLINE inline void merge_partials(const float* parts, int64_t count, int64_t stride, int64_t d, float* out) {
  float mx = -INFINITY;
  for (int64_t k = 0; k < count; ++k) mx = std::max(mx, parts[k * stride]);
  std::fill(out, out + d, 0.0f);
  float l = 0.0f;
  for (int64_t k = 0; k < count; ++k) {
    const float* part = parts + k * stride;
    if (part[0] == -INFINITY) continue;
    const float w = std::exp(part[0] - mx);
    l += part[1] * w;
    for (int64_t i = 0; i < d; ++i) out[i] += part[2 + i] * w;
  }
  const float inv = 1.0f / l;
  for (int64_t i = 0; i < d; ++i) out[i] *= inv;
}

}  // namespace rlt::attention::flash
#endif

HWY_BEFORE_NAMESPACE();
namespace rlt::attention {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::HWY_NAMESPACE::LoadWidened;
using kernels::HWY_NAMESPACE::WidenScalar;
using flash::kTile;

// Vector g of a Q8_0 head (lanes dividing 32) as f32, scale · q: the values
// quant::dequantize_row gives, so attention over them is attention over the dequantized cache.
// The blocked paths widen K/V this way in registers; storing them to a stage and loading them
// again cost Ouro's heads ~40 % of their decode speed (docs/benchmarks.md).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadQ8Vector(DF df, const uint8_t* HWY_RESTRICT head, int64_t g) {
  const int64_t first = g * static_cast<int64_t>(hn::Lanes(df));
  const uint8_t* block = head + first / kv::kQ8_0BlockValues * kv::kQ8_0BlockBytes;
  uint16_t bits;
  std::memcpy(&bits, block, 2);
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const auto scale = hn::PromoteTo(df, hn::BitCast(dh, hn::Set(du16, bits)));  // exact
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<int8_t, DF> di8;
  const auto q =
      hn::LoadU(di8, reinterpret_cast<const int8_t*>(block + 2 + first % kv::kQ8_0BlockValues));
  return hn::Mul(scale, hn::ConvertTo(df, hn::PromoteTo(di, q)));
}

// A whole Q8_0 head (d values) dequantized into out[0..d), for the per-key path.
HWY_INLINE void DequantizeQ8Head(const uint8_t* HWY_RESTRICT head, int64_t d,
                                 float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t g = 0; g * lanes < d; ++g)
    hn::StoreU(LoadQ8Vector(df, head, g), df, out + g * lanes);
}

template <typename T>
HWY_INLINE float Dot(const float* HWY_RESTRICT q, const T* HWY_RESTRICT k, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int64_t i = 0;
  for (; i + lanes <= d; i += lanes) acc = hn::MulAdd(hn::LoadU(df, q + i), LoadWidened(df, k + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; i < d; ++i) sum += q[i] * WidenScalar(k[i]);
  return sum;
}

// Blocked paths load a head vector as f32 vectors in "load order": in order for f32, f16 and Q8_0;
// for bf16, each load of 2N elements gives two vectors, its even elements and then its odd ones (a
// shift and a mask, where widening them in order costs an unpack and a shift per vector). Queries
// are permuted to the same order once per task (PermuteQuery); value accumulators stay in load
// order until they leave the task (StoreInOrder). Vectors per load (one lane: always in order):
template <typename T>
constexpr int64_t kLoadGroupVectors = std::is_same_v<T, hwy::bfloat16_t> && HWY_TARGET != HWY_SCALAR ? 2 : 1;

// Vector kHalf of load group g of a head vector (kHalf = 0 where a group is one vector).
template <int kHalf, class DF, typename T>
HWY_INLINE hn::Vec<DF> LoadOrderVector(DF df, const T* HWY_RESTRICT p, int64_t g) {
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  if constexpr (kLoadGroupVectors<T> == 2) {
    static_assert(std::endian::native == std::endian::little, "bf16 element 2i is the low half of 32-bit lane i");
    const hn::RebindToUnsigned<DF> du;
    const hn::Repartition<uint16_t, DF> du16;
    const auto raw = hn::BitCast(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p) + g * 2 * lanes));
    if constexpr (kHalf == 0) return hn::BitCast(df, hn::ShiftLeft<16>(raw));
    return hn::BitCast(df, hn::And(raw, hn::Set(du, 0xFFFF0000u)));
  } else if constexpr (std::is_same_v<T, flash::Q8_0Head>) {
    static_assert(kHalf == 0);
    return LoadQ8Vector(df, reinterpret_cast<const uint8_t*>(p), g);
  } else {
    static_assert(kHalf == 0);
    return LoadWidened(df, p + g * lanes);
  }
}

// out[0..kVec) = vectors v0 .. v0 + kVec of a head vector in load order (v0 and kVec whole groups).
template <int kVec, class DF, typename T>
HWY_INLINE void LoadOrderVectors(DF df, const T* HWY_RESTRICT p, int64_t v0, hn::Vec<DF>* out) {
  constexpr int kG = static_cast<int>(kLoadGroupVectors<T>);
  static_assert(kVec % kG == 0);
  for (int v = 0; v < kVec; v += kG) {
    out[v] = LoadOrderVector<0>(df, p, (v0 + v) / kG);
    if constexpr (kG == 2) out[v + 1] = LoadOrderVector<1>(df, p, (v0 + v) / kG);
  }
}

// out[0..d) = q[0..d) in bf16's load order.
HWY_INLINE void PermuteQuery(const float* HWY_RESTRICT q, float* HWY_RESTRICT out, int64_t d, int64_t lanes) {
  for (int64_t g = 0; g < d; g += 2 * lanes)
    for (int64_t i = 0; i < lanes; ++i) out[g + i] = q[g + 2 * i], out[g + lanes + i] = q[g + 2 * i + 1];
}

// out[0..d) = acc[0..d) (bf16's load order) * scale, in element order.
HWY_INLINE void StoreInOrder(const float* HWY_RESTRICT acc, float scale, float* HWY_RESTRICT out, int64_t d, int64_t lanes) {
  for (int64_t g = 0; g < d; g += 2 * lanes)
    for (int64_t i = 0; i < lanes; ++i) out[g + 2 * i] = acc[g + i] * scale, out[g + 2 * i + 1] = acc[g + lanes + i] * scale;
}

// Query-key pairs one score block serves, each widened key vector feeding all of them (the query
// heads of a GQA group, the rows of a verification or prefill block): kScorePairs x N / 2
// accumulators, the pairs' query vectors and a key fit the register file (32 vectors; 16 on
// 16-register targets).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kScorePairs = 2;
#else
constexpr int kScorePairs = 3;
#endif

// One folding round per call, kN vectors to kN / 2, until one is left: vector k becomes the
// adjacent-pair sums of vectors 2k (lower half) and 2k + 1 (upper half). A round per template
// instance, so that every index is a constant (a loop over the rounds left more of the caller's
// accumulators on the stack).
#if HWY_TARGET != HWY_SCALAR
template <size_t kN, class DF>
HWY_INLINE void FoldAdjacentPairs(DF df, hn::Vec<DF>* v) {
  if constexpr (kN > 1) {
    for (size_t k = 0; k < kN / 2; ++k)
      v[k] = hn::Add(hn::ConcatEven(df, v[2 * k + 1], v[2 * k]),
                     hn::ConcatOdd(df, v[2 * k + 1], v[2 * k]));
    FoldAdjacentPairs<kN / 2>(df, v);
  }
}
#endif

// Scores of kPairs queries (load order) against kKeys = N / 2 keys at once: one accumulator per
// (pair, key) over the head dimension, then each pair's kKeys accumulators folded into the lower
// half of one vector (lane k = key k) by pairwise adds: log2(kKeys) rounds, then one of the vector
// with itself. out[p][k] = scale * q_p . key_k. keys[k] points at key k's head vector.
// kD: the head dimension d when it is a compile-time constant, 0 otherwise.
template <typename T, int kPairs, int64_t kD = 0>
HWY_INLINE void ScoreBlock(const float* const* HWY_RESTRICT qs, const T* const* keys, int64_t d,
                           float scale, float* const* out) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
#if HWY_TARGET == HWY_SCALAR  // one lane: a key per block, nothing to fold
  for (int p = 0; p < kPairs; ++p) {
    V acc = hn::Zero(df);
    for (int64_t i = 0; i < d; ++i) acc = hn::MulAdd(hn::LoadU(df, qs[p] + i), LoadOrderVector<0>(df, keys[0], i), acc);
    out[p][0] = hn::GetLane(acc) * scale;
  }
#else
  constexpr size_t kLanes = hn::MaxLanes(df);
  constexpr size_t kKeys = kLanes / 2;
  const auto lanes = static_cast<int64_t>(kLanes);
  V acc[kPairs][kKeys];
  for (int p = 0; p < kPairs; ++p)
    for (size_t k = 0; k < kKeys; ++k) acc[p][k] = hn::Zero(df);
  constexpr int64_t kG = kLoadGroupVectors<T>;
  // Half 0 of every load group, then half 1: each key vector is widened once for all the pairs.
  // With the head dimension a constant (kD) the loops unroll and the accumulators stay in
  // registers; over a run-time d, g++ stored all of them on every pass.
  const int64_t dims = kD > 0 ? kD : d;
  for (int64_t g = 0; g * kG * lanes < dims; ++g) {
    for (size_t k = 0; k < kKeys; ++k) {
      const V kv = LoadOrderVector<0>(df, keys[k], g);
      for (int p = 0; p < kPairs; ++p)
        acc[p][k] = hn::MulAdd(hn::LoadU(df, qs[p] + g * kG * lanes), kv, acc[p][k]);
    }
  }
  if constexpr (kG == 2) {
    for (int64_t g = 0; g * kG * lanes < dims; ++g) {
      for (size_t k = 0; k < kKeys; ++k) {
        const V kv = LoadOrderVector<1>(df, keys[k], g);
        for (int p = 0; p < kPairs; ++p)
          acc[p][k] = hn::MulAdd(hn::LoadU(df, qs[p] + (g * kG + 1) * lanes), kv, acc[p][k]);
      }
    }
  }
  // Each round: the lower half of P(a, b) holds a's adjacent-pair sums, the upper half b's.
  const hn::Half<decltype(df)> dh;
  for (int p = 0; p < kPairs; ++p) {
    FoldAdjacentPairs<kKeys>(df, acc[p]);
    // Key k's sum is now split over lanes 2k and 2k + 1.
    const V sums = hn::Add(hn::ConcatEven(df, acc[p][0], acc[p][0]), hn::ConcatOdd(df, acc[p][0], acc[p][0]));
    hn::StoreU(hn::LowerHalf(dh, hn::Mul(sums, hn::Set(df, scale))), dh, out[p]);
  }
#endif
}

// Keys per score block.
HWY_INLINE constexpr int64_t ScoreBlockKeys() {
  const hn::ScalableTag<float> df;
  return hn::MaxLanes(df) == 1 ? 1 : static_cast<int64_t>(hn::MaxLanes(df) / 2);
}

// ScoreBlock for `count` <= kScorePairs pairs.
template <typename T, int64_t kD = 0, int kPairs = kScorePairs>
HWY_INLINE void ScoreBlockUpTo(int64_t count, const float* const* qs, const T* const* keys,
                               int64_t d, float scale, float* const* out) {
  if constexpr (kPairs >= 1) {
    if (count == kPairs) return ScoreBlock<T, kPairs, kD>(qs, keys, d, scale, out);
    ScoreBlockUpTo<T, kD, kPairs - 1>(count, qs, keys, d, scale, out);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// Pair-lane scoring (AVX-512, prefill): where a KV head serves at least 16 query-key pairs (the
// rows of a prefill block times the head's query heads), 16 of them take the lanes of a vector
// and every key element is broadcast, so no fold is needed; the 16 x 16 block of scores is
// transposed once at the end. The arithmetic is ScoreBlock's, operation for operation: lane
// partial l of a pair is the chain of multiply-adds over the head elements lane l holds, in the
// same order, and the fold's rounds are a binary tree over adjacent lanes, added here in the same
// pairs — so every score has the same bits whichever path computes it (decode keeps ScoreBlock).
constexpr int64_t kPairLanes = 16;

// In place: r[j] lane i becomes r[i] lane j.
HWY_INLINE void Transpose16x16(__m512 (&r)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4m + c]: in each 128-bit block b, element 4b + c of rows 4m .. 4m + 3.
  for (int m = 0; m < 4; ++m) {
    u[4 * m + 0] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], 0x44);
    u[4 * m + 1] = _mm512_shuffle_ps(t[4 * m], t[4 * m + 2], 0xEE);
    u[4 * m + 2] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], 0x44);
    u[4 * m + 3] = _mm512_shuffle_ps(t[4 * m + 1], t[4 * m + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// Lane partial x (lane l of ScoreBlock's accumulator) into the fold's binary tree (one pending
// sum per level); after lane 15, x holds the total.
HWY_INLINE void FoldLane(int l, __m512& x, __m512 (&pending)[4]) {
  for (int level = 0; level < 4; ++level) {
    if (((l >> level) & 1) == 0) {
      pending[level] = x;
      return;
    }
    x = _mm512_add_ps(pending[level], x);
  }
}

// Scores of 16 pairs against 16 keys: out[p][j] = scale · q_p · key_j. qt: the pairs' queries,
// element (c, l) of the chain — c-th vector in ScoreBlock's order, lane l — as a vector over the
// pairs at qt + (c · 16 + l) · 16; kw: key j's element (c, l) at kw[(j · kChain + c) · 16 + l].
template <int64_t kChain>
HWY_INLINE void ScorePairLanes(const float* HWY_RESTRICT qt, const float* HWY_RESTRICT kw,
                               float scale, float* const* out) {
  constexpr int kKeysAtOnce = 4;
  __m512 scores[16];
  for (int j0 = 0; j0 < 16; j0 += kKeysAtOnce) {
    __m512 pending[kKeysAtOnce][4];
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) {
      __m512 a[kKeysAtOnce];
      for (int j = 0; j < kKeysAtOnce; ++j) a[j] = _mm512_setzero_ps();
      for (int64_t c = 0; c < kChain; ++c) {
        const __m512 q = _mm512_loadu_ps(qt + (c * 16 + l) * 16);
        for (int j = 0; j < kKeysAtOnce; ++j)
          a[j] = _mm512_fmadd_ps(q, _mm512_set1_ps(kw[((j0 + j) * kChain + c) * 16 + l]), a[j]);
      }
      for (int j = 0; j < kKeysAtOnce; ++j) FoldLane(l, a[j], pending[j]);
      if (l == 15)
        for (int j = 0; j < kKeysAtOnce; ++j)
          scores[j0 + j] = _mm512_mul_ps(a[j], _mm512_set1_ps(scale));
    }
  }
  Transpose16x16(scores);
  for (int p = 0; p < 16; ++p) _mm512_storeu_ps(out[p], scores[p]);
}

// Key `key`'s head vector in ScoreBlock's chain order, widened: out[c · 16 + l].
template <typename T>
HWY_INLINE void WidenKeyChain(const T* HWY_RESTRICT key, int64_t d, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  constexpr int64_t kG = kLoadGroupVectors<T>;
  const int64_t groups = d / (kG * 16);
  for (int64_t g = 0; g < groups; ++g) hn::StoreU(LoadOrderVector<0>(df, key, g), df, out + g * 16);
  if constexpr (kG == 2)
    for (int64_t g = 0; g < groups; ++g)
      hn::StoreU(LoadOrderVector<1>(df, key, g), df, out + (groups + g) * 16);
}

// The query offset (load order) of chain step c: ScoreBlock takes half 0 of every load group,
// then half 1.
template <typename T>
HWY_INLINE int64_t ChainQueryOffset(int64_t c, int64_t d) {
  constexpr int64_t kG = kLoadGroupVectors<T>;
  const int64_t groups = d / (kG * 16);
  return ((c % groups) * kG + c / groups) * 16;
}
#endif

// acc[0..d) *= alpha
HWY_INLINE void Rescale(float* HWY_RESTRICT acc, float alpha, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto va = hn::Set(df, alpha);
  int64_t i = 0;
  for (; i + lanes <= d; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(df, acc + i), va), df, acc + i);
  for (; i < d; ++i) acc[i] *= alpha;
}

// acc[0..d) += p * v
template <typename T>
HWY_INLINE void AddScaledV(float* HWY_RESTRICT acc, float p, const T* HWY_RESTRICT v, int64_t d) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto vp = hn::Set(df, p);
  int64_t i = 0;
  for (; i + lanes <= d; i += lanes) hn::StoreU(hn::MulAdd(vp, LoadWidened(df, v + i), hn::LoadU(df, acc + i)), df, acc + i);
  for (; i < d; ++i) acc[i] += p * WidenScalar(v[i]);
}

// Pairs whose value accumulators one pass keeps in registers, and vectors of the head dimension
// per pass: each widened V vector then feeds up to kVPairs multiply-adds (four pairs of four
// vectors: 16 accumulators, 4 values and a broadcast fit AVX-512's and NEON's 32 registers; two
// pairs on 16-register targets).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kVPairs = 2;
#else
constexpr int kVPairs = 4;
#endif
constexpr int kVVectors = 4;

// For the kPairs pairs `prs` sharing one KV head: acc[pr][off .. off + kVec·lanes) += Σ_j w[pr][j] ·
// values[j][off ..] over keys j0 <= j < n, key by key in order — each element's sum is the one
// AddScaledV forms, with the accumulators held in registers instead of reloaded per key. Every
// pair must see every key of the range (a masked key's 0 · V would turn an Inf in V into NaN).
template <typename T, int kPairs, int kVec>
HWY_INLINE void AccumulateValues(const float* HWY_RESTRICT scores, const int64_t* prs, const T* const* values, int64_t j0,
                                 int64_t n, int64_t off, float* HWY_RESTRICT acc, int64_t d) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  V a[kPairs][kVec];
  for (int p = 0; p < kPairs; ++p)
    for (int v = 0; v < kVec; ++v) a[p][v] = hn::LoadU(df, acc + prs[p] * d + off + v * lanes);
  for (int64_t j = j0; j < n; ++j) {
    V vals[kVec];
    LoadOrderVectors<kVec>(df, values[j], off / lanes, vals);
    for (int p = 0; p < kPairs; ++p) {
      const V w = hn::Set(df, scores[prs[p] * kTile + j]);
      for (int v = 0; v < kVec; ++v) a[p][v] = hn::MulAdd(w, vals[v], a[p][v]);
    }
  }
  for (int p = 0; p < kPairs; ++p)
    for (int v = 0; v < kVec; ++v) hn::StoreU(a[p][v], df, acc + prs[p] * d + off + v * lanes);
}

template <typename T, int kPairs>
HWY_INLINE void AccumulateValuesPairs(const float* scores, const int64_t* prs, const T* const* values, int64_t j0,
                                      int64_t n, float* acc, int64_t d) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t vectors = d / lanes;
  int64_t v0 = 0;
  for (; v0 + kVVectors <= vectors; v0 += kVVectors)
    AccumulateValues<T, kPairs, kVVectors>(scores, prs, values, j0, n, v0 * lanes, acc, d);
  if (vectors - v0 == 2) return AccumulateValues<T, kPairs, 2>(scores, prs, values, j0, n, v0 * lanes, acc, d);
  if constexpr (kLoadGroupVectors<T> == 1) {  // bf16 heads are whole groups: an even count
    if (vectors - v0 == 3) return AccumulateValues<T, kPairs, 3>(scores, prs, values, j0, n, v0 * lanes, acc, d);
    if (vectors - v0 == 1) return AccumulateValues<T, kPairs, 1>(scores, prs, values, j0, n, v0 * lanes, acc, d);
  }
}

// Up to kVPairs pairs of one KV head (d a multiple of the vector length).
template <typename T, int kPairs = kVPairs>
HWY_INLINE void AccumulateValuesUpTo(int64_t count, const float* scores, const int64_t* prs, const T* const* values,
                                     int64_t j0, int64_t n, float* acc, int64_t d) {
  if constexpr (kPairs >= 1) {
    if (count == kPairs) return AccumulateValuesPairs<T, kPairs>(scores, prs, values, j0, n, acc, d);
    AccumulateValuesUpTo<T, kPairs - 1>(count, scores, prs, values, j0, n, acc, d);
  }
}

// Walks a sequence's keys in order without a division per key.
struct KeyCursor {
  const PagedKVLayerView& view;
  const int32_t* table;
  int64_t block_index, slot;
  KeyCursor(const PagedKVLayerView& v, const int32_t* t, int64_t key)
      : view(v), table(t), block_index(key / v.block_size), slot(key % v.block_size) {}
  int64_t offset() const { return table[block_index] * view.block_stride + slot * view.token_stride; }
  void advance() {
    if (++slot == view.block_size) slot = 0, ++block_index;
  }
};

// Asks for the cache lines of heads h0..h1 of a token row (head_stride units of S apart), into L1
// (kLocality 3) or L2 (2).
template <int kLocality = 3, typename S>
HWY_INLINE void PrefetchHeads(const S* token, int64_t head_stride, int64_t h0, int64_t h1) {
  const auto first = reinterpret_cast<uintptr_t>(token + h0 * head_stride) & ~uintptr_t{63};
  const auto last = reinterpret_cast<uintptr_t>(token + (h1 + 1) * head_stride);
  for (uintptr_t line = first; line < last; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, kLocality);
}

// Token rows (the task's heads, in the pool's encoding) up to this size are asked for into L2 a
// fixed distance ahead of the keys being scored, K and V alike. A decode step reads every layer's
// K/V from memory (the weights streamed between two visits evict it), and with short rows the
// hardware prefetchers alone left the kernel waiting: SmolLM2's heads (384-byte bf16 rows) at 14
// keys/us from memory, 21-23 with the distance (rlt_bench_attention --decode, 2026-12-07); 1 KiB
// rows 10 % faster; rows of 2 KiB and more (Ouro's 4 KiB) 5-10 % slower with it.
constexpr int64_t kRollingPrefetchRowBytes = 1024;

// kQ8: K/V stored as Q8_0 (T = float). The blocked paths read the blocks in place and widen each
// vector to the f32 values dequantization gives (LoadQ8Vector); the per-key path dequantizes a
// token's heads into the scratch's stages first. Either way the result is bit for bit the f32
// path's over the dequantized cache.
template <typename T, bool kQ8 = false>
void RunTask(const AttentionParams& p, const flash::Task& task, flash::Scratch& s, float* partial) {
  static_assert(!kQ8 || std::is_same_v<T, float>);
  using Stored = std::conditional_t<kQ8, uint8_t, T>;  // what the pools hold
  using Head = std::conditional_t<kQ8, flash::Q8_0Head, T>;  // a head as the blocked paths read it
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t d = p.head_dim();
  const int64_t q_heads = p.num_q_heads;
  const int64_t group = q_heads / p.num_kv_heads();
  const int64_t rows = task.row_end - task.row_begin;
  const int64_t pairs = rows * q_heads;  // pair = row * q_heads + query head
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // The task's pairs grouped by KV head, rows in order within each: KV head s.heads[i] is read
  // by pairs s.by_head[s.head_starts[i] .. s.head_starts[i + 1]). Every loop over pairs walks these.
  const int64_t qh0 = task.head_begin, qh1 = task.head_end < 0 ? q_heads : task.head_end;
  s.by_head.clear();
  s.heads.clear();
  s.head_starts.assign(1, 0);
  for (int64_t h = qh0 / group; h * group < qh1; ++h) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t qh = std::max(qh0, h * group); qh < std::min(qh1, (h + 1) * group); ++qh)
        s.by_head.push_back(r * q_heads + qh);
    s.heads.push_back(h);
    s.head_starts.push_back(static_cast<int64_t>(s.by_head.size()));
  }
  const std::span<const int64_t> task_pairs(s.by_head);
  const int32_t* table = p.block_tables + task.seq * p.table_width;
  const Stored* kbase = static_cast<const Stored*>(p.k.base);
  const Stored* vbase = static_cast<const Stored*>(p.v.base);
  // The head `h` of a token row (pool units), as the blocked paths read it.
  auto head_of = [](const Stored* token, int64_t head_stride, int64_t h) {
    return reinterpret_cast<const Head*>(token + h * head_stride);
  };
  // Causal limit of each query row (bottom-right aligned).
  const int64_t len = p.context_lengths[task.seq];
  const int64_t seq_rows = p.seq_end(task.seq) - p.seq_begin(task.seq);
  const int64_t first_row_pos = len - seq_rows + (task.row_begin - p.seq_begin(task.seq));
  s.scores.resize(static_cast<size_t>(pairs * kTile));
  s.acc.assign(static_cast<size_t>(pairs * d), 0.0f);
  s.m.assign(static_cast<size_t>(pairs), -INFINITY);
  s.l.assign(static_cast<size_t>(pairs), 0.0f);
  const float* q = p.q + task.row_begin * q_heads * d;  // pairs are contiguous query vectors
  // Blocked scores (ScoreBlock) and values (AccumulateValues), with queries and value accumulators
  // in load order, where whole load groups tile the head and score blocks the tile; the per-key
  // dot product otherwise (bf16 heads of an odd number of vectors — 80 or 112 on AVX-512 — too,
  // until a trailing in-order vector is supported). The choice depends on the shape only, so every
  // row of a model takes the same one, alone or batched.
  const bool blocked = d % (lanes * kLoadGroupVectors<T>) == 0 && kTile % ScoreBlockKeys() == 0 && lanes <= 16;
  if (kQ8 && !blocked) {  // a token's heads dequantized at a time
    s.kstage.resize(static_cast<size_t>(p.num_kv_heads() * d));
    s.vstage.resize(static_cast<size_t>(p.num_kv_heads() * d));
  }
  // Queries and value accumulators differ from element order (bf16 on the blocked path).
  const bool load_order = blocked && kLoadGroupVectors<T> == 2;
  const float* q_load_order = q;  // the task's queries in load order (blocked path)
  if (load_order) {
    s.q.resize(static_cast<size_t>(pairs * d));
    for (const int64_t pr : task_pairs) PermuteQuery(q + pr * d, s.q.data() + pr * d, d, lanes);
    q_load_order = s.q.data();
  }
  const int64_t key_end = std::min(task.key_end, first_row_pos + rows);  // nothing past the last row's limit
  // Pair-lane scoring for each head's first whole groups of 16 pairs (prefill blocks): their
  // queries with the pairs in lanes, once per task, head after head.
  [[maybe_unused]] bool pair_lanes = false;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  pair_lanes = blocked && lanes == kPairLanes && (d == 64 || d == 128);
  auto lane_groups = [&](size_t hi) {
    return pair_lanes ? (s.head_starts[hi + 1] - s.head_starts[hi]) / kPairLanes : 0;
  };
  auto lane_pairs = [&](size_t hi) { return lane_groups(hi) * kPairLanes; };
  if (pair_lanes) {
    int64_t groups = 0;
    for (size_t hi = 0; hi < s.heads.size(); ++hi) groups += lane_groups(hi);
    pair_lanes = groups > 0;
    s.qt.resize(static_cast<size_t>(groups * d * kPairLanes));
    float* qt = s.qt.data();
    for (size_t hi = 0; hi < s.heads.size(); ++hi) {
      for (int64_t gi = 0; gi < lane_groups(hi); ++gi, qt += d * kPairLanes) {
        const int64_t* group = s.by_head.data() + s.head_starts[hi] + gi * kPairLanes;
        for (int64_t c = 0; c < d / 16; ++c) {
          const float* chain = q_load_order + ChainQueryOffset<T>(c, d);
          for (int64_t l = 0; l < 16; ++l)
            for (int64_t pi = 0; pi < kPairLanes; ++pi)
              qt[(c * 16 + l) * kPairLanes + pi] = chain[group[pi] * d + l];
        }
      }
    }
  }
#else
  auto lane_pairs = [](size_t) { return int64_t{0}; };
#endif
  // A packed task whose last row sees more than kSplitTokens keys: rows that long keep one state
  // per range of kSplitTokens keys, as a split single-query row does (see the file comment).
  const bool ranged = partial == nullptr && first_row_pos + rows > flash::kSplitTokens;
  const int64_t pair_stride = d + 2;
  int64_t ranges = 0;
  // acc[pr] in element order, times `scale`, to dst.
  auto emit = [&](int64_t pr, float factor, float* dst) {
    if (load_order) return StoreInOrder(s.acc.data() + pr * d, factor, dst, d, lanes);
    for (int64_t i = 0; i < d; ++i) dst[i] = s.acc[pr * d + i] * factor;
  };
  // Saves the state of every pair whose row is longer than kSplitTokens as range `ranges`, and
  // starts those pairs afresh.
  auto close_range = [&] {
    s.parts.resize(static_cast<size_t>((ranges + 1) * pairs * pair_stride));
    for (const int64_t pr : task_pairs) {
      if (first_row_pos + pr / q_heads + 1 <= flash::kSplitTokens) continue;
      float* dst = s.parts.data() + (ranges * pairs + pr) * pair_stride;
      dst[0] = s.m[pr];
      dst[1] = s.l[pr];
      emit(pr, 1.0f, dst + 2);
      s.m[pr] = -INFINITY;
      s.l[pr] = 0.0f;
      std::fill(s.acc.begin() + pr * d, s.acc.begin() + (pr + 1) * d, 0.0f);
    }
    ++ranges;
  };
  KeyCursor kc(p.k, table, task.key_begin), vc(p.v, table, task.key_begin);
  const size_t zero_floats = static_cast<size_t>(d) * sizeof(T) / sizeof(float) + 1;
  if (s.zeros.size() < zero_floats) s.zeros.assign(zero_floats, 0.0f);  // never written: grown once
  // For Q8_0 (T = float) the d + 1 zero floats hold a head's d / 32 · 34 bytes of zero blocks too.
  const Head* zeros = reinterpret_cast<const Head*>(s.zeros.data());
  const Stored* vtokens[kTile];  // the tile's V token rows (blocked path)
  // Rolling prefetch (blocked path, short rows): K and V rows kL2AheadBytes of K ahead of the key
  // block being scored, into L2.
  const int64_t row_bytes = (s.heads.back() - s.heads.front() + 1) * p.k.head_stride *
                            static_cast<int64_t>(sizeof(Stored));
  const bool rolling = blocked && row_bytes <= kRollingPrefetchRowBytes;
  const int64_t ahead = std::max<int64_t>(1, kernels::kL2AheadBytes / row_bytes);
  // The first block asks for the task's first `ahead` keys too: a task's keys start where no
  // earlier prefetch reached (with SmolLM2's rows, 21 keys of a split row's 256-key task).
  KeyCursor kahead(p.k, table, task.key_begin), vahead(p.v, table, task.key_begin);
  int64_t next_ahead = task.key_begin;  // the next key whose rows are to be asked for
  for (int64_t t0 = task.key_begin; t0 < key_end; t0 += kTile) {
    if (ranged && t0 > task.key_begin && t0 % flash::kSplitTokens == 0) close_range();
    const int64_t tn = std::min(kTile, key_end - t0);
    // The keys of this tile pair `pr`'s row may see (rows see up to their own position).
    auto visible = [&](int64_t pr) { return std::clamp<int64_t>(first_row_pos + pr / q_heads - t0 + 1, 0, tn); };
    // Scores. One token's K for every head is contiguous, so keys are read sequentially.
    if (blocked) {
      // ScoreBlockKeys() keys and up to kScorePairs pairs of one KV head at a time, each key vector
      // widened once for the group; a block of keys is scored for every head before the next, so
      // the token rows are read in address order. Blocks no pair of a group sees are not computed;
      // keys a pair does not see score -inf whatever they hold. (Widening a head's keys to f32
      // once for all its pairs, into memory, was measured slower: the stores cost more than they
      // saved.)
      const Stored* tokens[kTile];
      for (int64_t j = 0; j < tn; ++j, kc.advance()) tokens[j] = kbase + kc.offset();
      // Longer rows: the tile's V rows are asked for now, to arrive while the scores are computed
      // (the V loop otherwise waits on each token's first line; the next tile's K rows likewise
      // measured no gain). Short rows come through the rolling prefetch below.
      for (int64_t j = 0; j < tn; ++j, vc.advance()) {
        vtokens[j] = vbase + vc.offset();
        if (!rolling) PrefetchHeads(vtokens[j], p.v.head_stride, s.heads.front(), s.heads.back());
      }
      constexpr int64_t kKeys = ScoreBlockKeys();
      for (int64_t j0 = 0; j0 < tn; j0 += kKeys) {
        if (rolling) {
          for (const int64_t until = std::min(key_end, t0 + j0 + kKeys + ahead); next_ahead < until;
               ++next_ahead, kahead.advance(), vahead.advance()) {
            PrefetchHeads<2>(kbase + kahead.offset(), p.k.head_stride, s.heads.front(),
                             s.heads.back());
            PrefetchHeads<2>(vbase + vahead.offset(), p.v.head_stride, s.heads.front(),
                             s.heads.back());
          }
        }
        for (size_t hi = 0; hi < s.heads.size(); ++hi) {
          const int64_t h = s.heads[hi], per_head = s.head_starts[hi + 1] - s.head_starts[hi];
          const int64_t* head_pairs = s.by_head.data() + s.head_starts[hi];
          // Rows ascend within a head: its last pair sees the most keys.
          if (j0 >= visible(head_pairs[per_head - 1])) continue;
          const Head* keys[kKeys];  // past the tile's end: a zero key
          for (int64_t k = 0; k < kKeys; ++k)
            keys[k] = j0 + k < tn ? head_of(tokens[j0 + k], p.k.head_stride, h) : zeros;
          for (int64_t i = lane_pairs(hi); i < per_head; i += kScorePairs) {
            const int64_t count = std::min<int64_t>(kScorePairs, per_head - i);
            if (j0 >= visible(head_pairs[i + count - 1])) continue;
            const float* qs[kScorePairs];
            float* outs[kScorePairs];
            for (int64_t k = 0; k < count; ++k) {
              qs[k] = q_load_order + head_pairs[i + k] * d;
              outs[k] = s.scores.data() + head_pairs[i + k] * kTile + j0;
            }
            // The common head sizes with a constant head dimension (ScoreBlock).
            if (d == 64)
              ScoreBlockUpTo<Head, 64>(count, qs, keys, d, scale, outs);
            else if (d == 128)
              ScoreBlockUpTo<Head, 128>(count, qs, keys, d, scale, outs);
            else
              ScoreBlockUpTo<Head>(count, qs, keys, d, scale, outs);
          }
        }
      }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
      if (pair_lanes) {
        const float* qt = s.qt.data();
        s.kw.resize(static_cast<size_t>(kTile * d));
        for (size_t hi = 0; hi < s.heads.size(); ++hi) {
          const int64_t groups = lane_groups(hi);
          if (groups == 0) continue;
          const int64_t h = s.heads[hi];
          const int64_t* head_pairs = s.by_head.data() + s.head_starts[hi];
          const int64_t seen = visible(head_pairs[groups * kPairLanes - 1]);
          // Keys in blocks of 16 up to the groups' last visible one; past the tile's end, zeros.
          for (int64_t j = 0; j < std::min(kTile, (seen + 15) / 16 * 16); ++j)
            WidenKeyChain(j < tn ? head_of(tokens[j], p.k.head_stride, h) : zeros, d,
                          s.kw.data() + j * d);
          for (int64_t gi = 0; gi < groups; ++gi, qt += d * kPairLanes) {
            const int64_t* group = head_pairs + gi * kPairLanes;
            for (int64_t j0 = 0; j0 < visible(group[kPairLanes - 1]); j0 += 16) {
              float* outs[kPairLanes];
              for (int64_t pi = 0; pi < kPairLanes; ++pi)
                outs[pi] = s.scores.data() + group[pi] * kTile + j0;
              if (d == 64)
                ScorePairLanes<4>(qt, s.kw.data() + j0 * d, scale, outs);
              else
                ScorePairLanes<8>(qt, s.kw.data() + j0 * d, scale, outs);
            }
          }
        }
      }
#endif
      for (const int64_t pr : task_pairs) {
        float* sc = s.scores.data() + pr * kTile;
        std::fill(sc + visible(pr), sc + kTile, -INFINITY);
      }
    } else {
      for (int64_t j = 0; j < tn; ++j, kc.advance()) {
        const Stored* kj = kbase + kc.offset();
        if constexpr (kQ8)
          for (const int64_t h : s.heads)
            DequantizeQ8Head(kj + h * p.k.head_stride, d, s.kstage.data() + h * d);
        for (const int64_t pr : task_pairs) {
          const int64_t limit = first_row_pos + pr / q_heads;  // last visible key of this row
          const int64_t head = (pr % q_heads) / group;
          const T* key;
          if constexpr (kQ8)
            key = s.kstage.data() + head * d;
          else
            key = kj + head * p.k.head_stride;
          s.scores[pr * kTile + j] =
              (t0 + j <= limit) ? Dot(q + pr * d, key, d) * scale : -INFINITY;
        }
      }
    }
    // Online softmax: one rescale per pair per tile.
    for (const int64_t pr : task_pairs) {
      float* sc = s.scores.data() + pr * kTile;
      for (int64_t j = tn; j < kTile; ++j) sc[j] = -INFINITY;
      auto vmax_tile = hn::Set(df, -INFINITY);  // a maximum is exact in any order
      for (int64_t j = 0; j < kTile; j += lanes) vmax_tile = hn::Max(vmax_tile, hn::LoadU(df, sc + j));
      const float tile_max = hn::GetLane(hn::MaxOfLanes(df, vmax_tile));
      const float m_new = std::max(s.m[pr], tile_max);
      if (m_new == -INFINITY) {  // every key of the tile is masked for this row
        for (int64_t j = 0; j < kTile; ++j) sc[j] = 0.0f;
        continue;
      }
      const float alpha = s.m[pr] == -INFINITY ? 0.0f : std::exp(s.m[pr] - m_new);
      const auto vmax = hn::Set(df, m_new);
      const auto floor = hn::Set(df, -87.0f);  // exp underflows to ~0 below this; keeps Exp in range
      // The tile's weights summed lane-wise, then across lanes: one fixed order whatever the
      // batch (masked keys and keys past the tile's end weigh exactly 0).
      auto vsum = hn::Zero(df);
      for (int64_t j = 0; j < kTile; j += lanes) {
        const auto x = hn::LoadU(df, sc + j);
        const auto valid = hn::Ne(x, hn::Set(df, -INFINITY));
        const auto w = hn::IfThenElseZero(valid, hn::Exp(df, hn::Max(hn::Sub(x, vmax), floor)));
        hn::StoreU(w, df, sc + j);
        vsum = hn::Add(vsum, w);
      }
      s.l[pr] = s.l[pr] * alpha + hn::GetLane(hn::SumOfLanes(df, vsum));
      s.m[pr] = m_new;
      if (alpha != 1.0f) Rescale(s.acc.data() + pr * d, alpha, d);
    }
    if (blocked) {
      // Values: the pairs of each KV head in groups of kVPairs, every widened V vector shared by
      // the group (pairs sorted by head in s.by_head).
      for (size_t hi = 0; hi < s.heads.size(); ++hi) {
        const int64_t h = s.heads[hi], per_head = s.head_starts[hi + 1] - s.head_starts[hi];
        const Head* values[kTile];
        for (int64_t j = 0; j < tn; ++j) values[j] = head_of(vtokens[j], p.v.head_stride, h);
        const int64_t* head_pairs = s.by_head.data() + s.head_starts[hi];
        for (int64_t i = 0; i < per_head; i += kVPairs) {
          const int64_t count = std::min<int64_t>(kVPairs, per_head - i);
          // Rows ascend within a head: the group's first pair sees the fewest keys. The keys all
          // of them see go together, the rest pair by pair up to each one's causal limit.
          const int64_t common = visible(head_pairs[i]);
          if (common > 0)
            AccumulateValuesUpTo<Head>(count, s.scores.data(), head_pairs + i, values, 0, common,
                                       s.acc.data(), d);
          for (int64_t k = i; k < i + count; ++k)
            if (visible(head_pairs[k]) > common)
              AccumulateValuesUpTo<Head>(1, s.scores.data(), head_pairs + k, values, common,
                                         visible(head_pairs[k]), s.acc.data(), d);
        }
      }
    } else {
      // Values, again one token (all heads) at a time.
      for (int64_t j = 0; j < tn; ++j, vc.advance()) {
        const Stored* vj = vbase + vc.offset();
        if constexpr (kQ8)
          for (const int64_t h : s.heads)
            DequantizeQ8Head(vj + h * p.v.head_stride, d, s.vstage.data() + h * d);
        for (const int64_t pr : task_pairs) {
          const float w = s.scores[pr * kTile + j];
          const int64_t head = (pr % q_heads) / group;
          const T* value;
          if constexpr (kQ8)
            value = s.vstage.data() + head * d;
          else
            value = vj + head * p.v.head_stride;
          if (w != 0.0f) AddScaledV(s.acc.data() + pr * d, w, value, d);
        }
      }
    }
  }
  if (partial != nullptr) {  // split: hand (m, l, acc) to the merge
    for (const int64_t pr : task_pairs) {
      float* dst = partial + pr * (d + 2);
      dst[0] = s.m[pr];
      dst[1] = s.l[pr];
      emit(pr, 1.0f, dst + 2);
    }
    return;
  }
  if (ranged) close_range();
  float* out = p.out + task.row_begin * q_heads * d;
  for (const int64_t pr : task_pairs) {
    if (ranged && first_row_pos + pr / q_heads + 1 > flash::kSplitTokens) {
      flash::merge_partials(s.parts.data() + pr * pair_stride, ranges, pairs * pair_stride, d, out + pr * d);
      continue;
    }
    emit(pr, 1.0f / s.l[pr], out + pr * d);
  }
}

void RunFlash(const AttentionParams& p, const std::vector<flash::Task>& tasks, float* partials,
              int64_t partial_stride, std::vector<flash::Scratch>& scratch, bool parallel) {
  const auto count = static_cast<int64_t>(tasks.size());
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t i = 0; i < count; ++i) {
    const flash::Task& t = tasks[static_cast<size_t>(i)];
    const int thread = omp_get_thread_num();
    flash::Scratch& s = scratch[static_cast<size_t>(thread)];
    float* partial = t.split >= 0 ? partials + t.split * partial_stride : nullptr;
    switch (p.k.dtype) {
      case DType::kBF16: RunTask<hwy::bfloat16_t>(p, t, s, partial); break;
      case DType::kF16: RunTask<hwy::float16_t>(p, t, s, partial); break;
      case DType::kQ8_0: RunTask<float, true>(p, t, s, partial); break;
      default: RunTask<float>(p, t, s, partial); break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rlt::attention
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::attention {
HWY_EXPORT(RunFlash);

namespace {

class CpuFlashBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "cpu_flash"; }

  Status run(const AttentionParams& p) override {
    const int64_t d = p.head_dim();
    tasks_.clear();
    merges_.clear();
    int64_t splits = 0;
    for (int64_t s = 0; s < p.num_seqs; ++s) {
      const int64_t begin = p.seq_begin(s), end = p.seq_end(s), len = p.context_lengths[s];
      if (end - begin == 1 && len > flash::kSplitTokens) {
        const int64_t parts = (len + flash::kSplitTokens - 1) / flash::kSplitTokens;
        merges_.push_back({s, splits, parts});
        for (int64_t k = 0; k < parts; ++k) {
          tasks_.push_back({s, k * flash::kSplitTokens, std::min(len, (k + 1) * flash::kSplitTokens), begin, end, splits++});
        }
      } else {
        // A few rows (a speculative verification's K + 1, decode rows of one sequence) go as one
        // task, which the split by heads below spreads over idle threads, so that every K/V load
        // serves all of them; prefill chunks share each K/V load between kQueryBlock rows. Rows
        // are independent inside a task: no result changes.
        const int64_t block = end - begin <= flash::kFewRows ? end - begin : flash::kQueryBlock;
        for (int64_t r = begin; r < end; r += block) tasks_.push_back({s, 0, len, r, std::min(end, r + block), -1});
      }
    }
    const int64_t pair_stride = d + 2;
    const int64_t stride = p.num_q_heads * pair_stride;  // one split's partial states
    partials_.resize(static_cast<size_t>(splits * stride));
    scratch_.resize(static_cast<size_t>(omp_get_max_threads()));
    // Small batches run on the calling thread: a parallel region (a microsecond or two with the
    // workers spinning) costs more than it saves below ~2^15 multiply-adds of scores (~4 µs on
    // one core).
    int64_t work = 0;
    for (int64_t s = 0; s < p.num_seqs; ++s) work += (p.seq_end(s) - p.seq_begin(s)) * int64_t{p.context_lengths[s]};
    const bool worth_threads = work * p.num_q_heads * d >= (int64_t{1} << 15);
    // Fewer tasks than threads (a lone decode row short of a split, one verification): each is
    // split by query heads too, which changes no result. Query-head boundaries, not KV-head
    // ones: SmolLM2's 9 heads over 2 threads go 4 + 5 (reading one KV head twice) instead of 3 + 6.
    // (Splitting a few uneven 256-key ranges by KV heads as well, to even the threads' shares,
    // measured no gain: the tasks' fixed costs ate it.)
    const auto threads = static_cast<size_t>(omp_get_max_threads());
    if (worth_threads && !tasks_.empty() && tasks_.size() < threads) {
      const auto ways = static_cast<int64_t>(std::min<size_t>(p.num_q_heads, (threads + tasks_.size() - 1) / tasks_.size()));
      by_heads_.clear();
      for (const flash::Task& t : tasks_) {
        for (int64_t w = 0; w < ways; ++w) {
          flash::Task part = t;
          part.head_begin = w * p.num_q_heads / ways;
          part.head_end = (w + 1) * p.num_q_heads / ways;
          by_heads_.push_back(part);
        }
      }
      tasks_.swap(by_heads_);
    }
    const bool parallel = tasks_.size() > 1 && worth_threads;
    HWY_DYNAMIC_DISPATCH(RunFlash)(p, tasks_, partials_.data(), stride, scratch_, parallel);
    // Merge split partial states in split order: exact log-sum-exp combination.
    for (const Merge& m : merges_) {
      const int64_t row = p.seq_begin(m.seq);
      for (int64_t h = 0; h < p.num_q_heads; ++h) {
        flash::merge_partials(partials_.data() + m.first * stride + h * pair_stride, m.parts, stride, d,
                              p.out + (row * p.num_q_heads + h) * d);
      }
    }
    return {};
  }

 private:
  struct Merge {
    int64_t seq, first, parts;
  };
  std::vector<flash::Task> tasks_, by_heads_;
  std::vector<Merge> merges_;
  std::vector<float> partials_;
  std::vector<flash::Scratch> scratch_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cpu_flash_backend() { return std::make_unique<CpuFlashBackend>(); }

}  // namespace rlt::attention
#endif  // HWY_ONCE
