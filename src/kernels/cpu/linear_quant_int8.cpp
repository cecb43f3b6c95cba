// Highway dynamic dispatch: this file is compiled once per SIMD target, AVX3_DL (Ice Lake and
// later: AVX-512 VNNI) included, which Highway 1.0 builds only on request. The kernel is written
// once against int8_lanes-inl.h (AVX2, AVX-512, AVX-512 VNNI byte products, NEON widening
// multiplies: no Highway op in the version Debian ships), so it exists on the x86 targets from AVX2
// up and on AArch64; the others report it unsupported (packing then keeps the f32-activation
// layout).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/linear_quant_int8.cpp"
#include "kernels/cpu/linear_quant_int8.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/int8_lanes-inl.h"
#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/row_count-inl.h"
#include "kernels/cpu/stream_prefetch.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni")  // as in int8_lanes-inl.h
#endif
namespace rlt::kernels {
namespace HWY_NAMESPACE {

#if RLT_INT8_LANES

using quant::GgmlType;
constexpr int64_t kPanel = PackedMatrix::kPanelWidth;
constexpr int64_t kQuadBytes = 4 * kPanel;  // one column quad (octet for nibbles) of 64 outputs

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
  for (int64_t i = part * per; i < std::min(lines, (part + 1) * per); ++i) {
    __builtin_prefetch(ahead.at + kL2AheadBytes + i * kLine, 0, 2);
    __builtin_prefetch(ahead.at + i * kLine);
  }
}

// Which part of the panel a pass prefetches: the `parts` passes over a stretch of blocks (the
// slices and tiles of a few rows) each take their `part` of every group's share, so the stream
// from memory is spread over all of the arithmetic.
struct PrefetchShare {
  int part = 0, parts = 1;
};

// Rows share each weight load four at a time in slices of two vectors. A batch of 2-31 rows (a
// speculative verification, a decode step of a few requests) goes as tiles of 2-4 rows, never a
// lone row, prefetching (Int8FewRows), as does a prefill's tail of 2-31 rows; a single row
// (decode) takes all 64 outputs at once with the spread prefetch; more rows (prefill) go in blocks
// of 64 rows, the panel then read from L2.
constexpr int kTileRows = 4;
constexpr int64_t kFewRows = 32;
// Bytes ahead into L1: on the AVX2 EPYC 2–8 KiB measured within noise (8 KiB best for Q6_K); on an
// AVX-512 Xeon, inside the engine's decode, L1 prefetches alone 8 KiB ahead cost 25 % against
// 1–2 KiB (Ouro-shape Q8_0 3.7 against 5.0 tokens/s, Q4_K 5.3 at 4 KiB against 7.3); with the L2
// prefetches beyond them (kL2AheadBytes) 1 KiB and 2 KiB measured alike (8.4-8.5 tokens/s).
constexpr int64_t kDecodeAhead = 1024;
// A few rows do 2-31 times a row's arithmetic per byte, so their prefetches reach further (and
// are spread over all their passes, Int8FewRows): SmolLM2 Q4_1 linear layers at 4 rows cost 1.38x
// a row's time at 8 KiB (16 KiB the same) against 1.50-1.77x with the 2 KiB of one row.
constexpr int64_t kFewRowsAhead = 8192;
// A few rows' tiles and slices each pass over this many columns of the panel before the next
// stretch: its bytes (10 KiB of Q4_1, 17 KiB of Q8_0 at 64 outputs) stay in a 48 KiB L1 between
// the passes for a few rows (more rows' activations and sums crowd it; then L2 serves them).
constexpr int64_t kStretchCols = 256;

using Int8PanelFn = void (*)(const QuantizedActivations&, int64_t, int64_t, const PackedMatrix&,
                             int64_t, const uint8_t*, float*);

// The panel routines of each lanes struct this target runs, in a namespace of their own.
namespace base_lanes {
using L = Int8Lanes;
#include "kernels/cpu/int8_panels-inl.h"  // NOLINT(build/include): once per lanes struct
}  // namespace base_lanes
#if HWY_ARCH_ARM_A64
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+crypto")
namespace dot_lanes {
using L = NeonDotLanes;
#include "kernels/cpu/int8_panels-inl.h"  // NOLINT(build/include)
}  // namespace dot_lanes
#pragma GCC pop_options
#endif

// The lanes struct this CPU runs: on AArch64 sdot where the core has the dot-product extension
// (Armv8.2 and later: Neoverse N1 / Graviton 2 on, Cortex-A76 on, Apple M1 on), else the
// widening multiplies every AArch64 core has. Both give the same bits (the same integers).
struct Int8Variant {
  const char* name;
  Int8PanelFn (*panel_fn)(GgmlType);
};
Int8Variant CurrentVariant() {
#if HWY_ARCH_ARM_A64
  if (CpuHasDotProduct()) return {NeonDotLanes::kName, &dot_lanes::int8_panel_fn};
#endif
  return {Int8Lanes::kName, &base_lanes::int8_panel_fn};
}

const char* Int8KernelName() {
  return CurrentVariant().name;
}

void LinearQuantInt8Impl(const float* x, int64_t m, const PackedMatrix& w, float* y) {
  thread_local QuantizedActivations rounded;
  quantize_activations(x, m, w.cols(), rounded);
  const QuantizedActivations& a =
      rounded;  // the caller's copy: thread_local names differ per thread
  const auto* base = static_cast<const uint8_t*>(w.data());
  const Int8Variant variant = CurrentVariant();
  // Threads split panels and, for prefill, blocks of rows, as the f32 kernel does (results do not
  // depend on the split). Integer products cost about a quarter of the f32 kernel's decoding, so
  // the parallel region pays from a larger product.
  const bool parallel = m * w.outputs() * w.cols() >= (int64_t{1} << 18);
  constexpr int64_t kRowBlock = 64;
  const int64_t block_rows = m >= kFewRows ? kRowBlock : m;
  const int64_t row_blocks = (m + block_rows - 1) / block_rows;
  const int64_t tasks = w.panels() * row_blocks;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t p = task / row_blocks, r0 = task % row_blocks * block_rows;
    const PackedMatrix::QuantPanel& qp = w.quant_panels()[static_cast<size_t>(p)];
    if (const Int8PanelFn fn = variant.panel_fn(qp.type))
      fn(a, r0, std::min(block_rows, m - r0), w, p, base + qp.offset, y);
  }
}

#else  // no Int8Lanes: the kernel does not exist here and packing never asks for it

const char* Int8KernelName() {
  return "";
}

void LinearQuantInt8Impl(const float*, int64_t, const PackedMatrix&, float*) {
  HWY_ABORT(
      "the int8-activation kernel needs AVX2 or AArch64; PackedMatrix never lays a matrix out "
      "for it on this CPU");
}

#endif  // RLT_INT8_LANES

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

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
void QuantizeActivationsImpl(const float* x, int64_t r0, int64_t r1, int64_t k,
                             QuantizedActivations& out) {
  const int64_t groups = k / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lim = _mm256_set1_epi32(127), neg_lim = _mm256_set1_epi32(-127);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane split
  for (int64_t r = r0; r < r1; ++r) {
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

#elif HWY_ARCH_ARM_A64

// quantize_activations, 32 columns per step, for the NEON kernels. The same values as the scalar
// definition below: max is exact, d and 1/d are the same scalar divisions, the product x · (1/d)
// the same f32 multiply and vcvtnq rounds it to nearest even, as lrint does.
void QuantizeActivationsImpl(const float* x, int64_t r0, int64_t r1, int64_t k,
                             QuantizedActivations& out) {
  const int64_t groups = k / 32;
  const int32x4_t lim = vdupq_n_s32(127), neg_lim = vdupq_n_s32(-127);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * k + g * 32;
      float32x4_t v[8];
      float32x4_t amax = vdupq_n_f32(0.0f);
      for (int i = 0; i < 8; ++i) {
        v[i] = vld1q_f32(xg + 4 * i);
        amax = vmaxq_f32(amax, vabsq_f32(v[i]));
      }
      const float mx = vmaxvq_f32(amax);
      const float d = mx / 127.0f;
      const float32x4_t inv = vdupq_n_f32(mx > 0.0f ? 127.0f / mx : 0.0f);
      int32x4_t q[8];
      for (int i = 0; i < 8; ++i)
        q[i] = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_f32(v[i], inv)), lim), neg_lim);
      int16x8_t halves[4];
      for (int i = 0; i < 4; ++i)
        halves[i] = vcombine_s16(vmovn_s32(q[2 * i]), vmovn_s32(q[2 * i + 1]));
      int8_t* dst = out.q.data() + r * k + g * 32;
      vst1q_s8(dst, vcombine_s8(vmovn_s16(halves[0]), vmovn_s16(halves[1])));
      vst1q_s8(dst + 16, vcombine_s8(vmovn_s16(halves[2]), vmovn_s16(halves[3])));
      const size_t at = static_cast<size_t>(r * groups + g);
      const int32_t s0 = vaddvq_s32(vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3])));
      const int32_t s1 = vaddvq_s32(vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
      out.d[at] = d;
      out.sum16[2 * at] = s0;
      out.sum16[2 * at + 1] = s1;
      out.dsum[at] = d * static_cast<float>(s0 + s1);
    }
  }
}

#else

// The definition the AVX2 and NEON versions follow (linear_quant_int8.h): the rounding of every
// other target and the tests' reference.
void QuantizeActivationsImpl(const float* x, int64_t r0, int64_t r1, int64_t k,
                             QuantizedActivations& out) {
  const int64_t groups = k / 32;
  for (int64_t r = r0; r < r1; ++r) {
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

#endif

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {
HWY_EXPORT(LinearQuantInt8Impl);
HWY_EXPORT(Int8KernelName);
HWY_EXPORT(QuantizeActivationsImpl);

bool linear_quant_int8_supported() {
  static const bool supported = *HWY_DYNAMIC_DISPATCH(Int8KernelName)() != '\0';
  return supported;
}

std::string linear_quant_int8_kernel() {
  return HWY_DYNAMIC_DISPATCH(Int8KernelName)();
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
  // Rows are independent: threads take blocks of them (the same values whoever computes a row).
  parallel_blocks(m, 8, k, [&](int64_t r0, int64_t r1) {
    HWY_DYNAMIC_DISPATCH(QuantizeActivationsImpl)(x, r0, r1, k, out);
  });
}

}  // namespace rlt::kernels
#endif  // HWY_ONCE
