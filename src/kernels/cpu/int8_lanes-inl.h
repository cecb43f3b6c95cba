// Per-target vector operations of the int8-activation kernel (linear_quant_int8.cpp), one struct
// per instruction set: Avx2Lanes (8 outputs per vector, vpmaddubsw), Avx512Lanes<false> (16
// outputs, the same byte products on 512 bits), Avx512Lanes<true> (16 outputs, VNNI vpdpbusd: four
// byte products summed into int32 in one instruction), NeonLanes (4 outputs, widening 16-bit
// multiplies and pairwise adds: Armv8.0, every AArch64 core) and NeonDotLanes (4 outputs, sdot:
// the dot-product extension of Armv8.2 on, chosen at run time). `Int8Lanes` names the current
// target's baseline and RLT_INT8_LANES says whether it has one. The kernel is written once
// against these (int8_panels-inl.h); they have no Highway op in the version Debian ships (Highway
// 1.0.3 lacks SumOfMulQuadAccumulate), hence intrinsics.
//
// Integer contract (every struct): a `partial` accumulates products of weight bytes and signed
// activation bytes; the weights are unsigned bytes, or signed ones where kSignedWeights (sdot
// multiplies signed by signed; every weight but Q8_0's is below 128, so the same integers). On
// the vpmaddubsw structs a partial holds int16 pair sums, so the caller bounds how many MulAdd
// calls precede a Widen (the kernel states the bounds per type); on VNNI and NEON it holds int32
// quad sums and Widen is an add. All compute the same exact integers.
#if defined(RLT_KERNELS_CPU_INT8_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RLT_KERNELS_CPU_INT8_LANES_INL_H_
#undef RLT_KERNELS_CPU_INT8_LANES_INL_H_
#else
#define RLT_KERNELS_CPU_INT8_LANES_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#if HWY_ARCH_ARM_A64
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)  // asm/hwcap.h
#endif
#endif
#endif

// Whether the target being compiled has an Int8Lanes (x86 from AVX2 up, every AArch64 target).
#undef RLT_INT8_LANES
#if (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) || HWY_ARCH_ARM_A64
#define RLT_INT8_LANES 1
#else
#define RLT_INT8_LANES 0
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL
// Highway 1.0.3 compiles AVX3_DL with "avxvnni" (the VEX form) where its runtime check, like every
// AVX-512 VNNI CPU, has avx512vnni: vpdpbusd on zmm needs the latter.
#pragma GCC target("avx512vnni")
#endif
namespace rlt::kernels {
namespace HWY_NAMESPACE {

// Four bytes from p as one 32-bit value (an unaligned read, as the lanes' broadcasts want).
HWY_INLINE int32_t Read4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

struct Avx2Lanes {
  using I = __m256i;
  using F = __m256;
  static constexpr const char* kName = "AVX2 vpmaddubsw";
  static constexpr int kLanes = 8;  // int32 / f32 lanes: outputs per vector
  static constexpr int kTileVectors = 2;
  static constexpr bool kInt32Quads = false;  // pair sums saturate at int16
  static constexpr bool kSignedWeights = false;

  static HWY_INLINE I Load(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  // Four consecutive int8 activations in every 32-bit lane.
  static HWY_INLINE I Broadcast4(const int8_t* p) { return _mm256_set1_epi32(Read4(p)); }
  static HWY_INLINE I Zero() { return _mm256_setzero_si256(); }
  static HWY_INLINE I Bytes(uint8_t c) { return _mm256_set1_epi8(static_cast<char>(c)); }
  static HWY_INLINE I Set32(int32_t v) { return _mm256_set1_epi32(v); }
  static HWY_INLINE I And(I a, I b) { return _mm256_and_si256(a, b); }
  static HWY_INLINE I Or(I a, I b) { return _mm256_or_si256(a, b); }
  static HWY_INLINE I Xor(I a, I b) { return _mm256_xor_si256(a, b); }
  template <int kBits>
  static HWY_INLINE I Shr16(I a) {
    return _mm256_srli_epi16(a, kBits);
  }
  static HWY_INLINE I Sub32(I a, I b) { return _mm256_sub_epi32(a, b); }

  static HWY_INLINE I MulAdd(I partial, I w_u8, I x_s8) {
    return _mm256_add_epi16(partial, _mm256_maddubs_epi16(w_u8, x_s8));
  }
  static HWY_INLINE I Widen(I acc, I partial) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(partial, _mm256_set1_epi16(1)));
  }
  // acc + Σ w · x per quad, exact for unsigned w and one quad's pair sums within int16.
  static HWY_INLINE I MulAddWiden(I acc, I w_u8, I x_s8) {
    return Widen(acc, _mm256_maddubs_epi16(w_u8, x_s8));
  }
  // Signed weights as |w| times x carrying w's sign (the byte products take unsigned weights).
  static HWY_INLINE I Magnitude(I w) { return _mm256_abs_epi8(w); }
  static HWY_INLINE I WithSignOf(I x, I w) { return _mm256_sign_epi8(x, w); }

  static HWY_INLINE void StoreF(float* p, F v) { _mm256_storeu_ps(p, v); }
  static HWY_INLINE F LoadF(const float* p) { return _mm256_loadu_ps(p); }
  static HWY_INLINE F SetF(float v) { return _mm256_set1_ps(v); }
  static HWY_INLINE F ZeroF() { return _mm256_setzero_ps(); }
  static HWY_INLINE F Mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static HWY_INLINE F Fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static HWY_INLINE F Neg(F a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static HWY_INLINE F ToF(I a) { return _mm256_cvtepi32_ps(a); }
  // kLanes f16 / unsigned / signed bytes from p, as f32.
  static HWY_INLINE F HalvesToF(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static HWY_INLINE F U8ToF(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static HWY_INLINE F S8ToF(const uint8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
};

#if HWY_TARGET <= HWY_AVX3
template <bool kVnni>
struct Avx512Lanes {
  using I = __m512i;
  using F = __m512;
  static constexpr const char* kName = kVnni ? "AVX-512 VNNI vpdpbusd" : "AVX-512 vpmaddubsw";
  static constexpr int kLanes = 16;
  static constexpr int kTileVectors = 2;
  // Whether a quad's four byte products go straight to int32 (VNNI): then any unsigned byte
  // times any signed one is exact.
  static constexpr bool kInt32Quads = kVnni;
  static constexpr bool kSignedWeights = false;

  static HWY_INLINE I Load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static HWY_INLINE I Broadcast4(const int8_t* p) { return _mm512_set1_epi32(Read4(p)); }
  static HWY_INLINE I Zero() { return _mm512_setzero_si512(); }
  static HWY_INLINE I Bytes(uint8_t c) { return _mm512_set1_epi8(static_cast<char>(c)); }
  static HWY_INLINE I Set32(int32_t v) { return _mm512_set1_epi32(v); }
  static HWY_INLINE I And(I a, I b) { return _mm512_and_si512(a, b); }
  static HWY_INLINE I Or(I a, I b) { return _mm512_or_si512(a, b); }
  static HWY_INLINE I Xor(I a, I b) { return _mm512_xor_si512(a, b); }
  template <int kBits>
  static HWY_INLINE I Shr16(I a) {
    return _mm512_srli_epi16(a, kBits);
  }
  static HWY_INLINE I Sub32(I a, I b) { return _mm512_sub_epi32(a, b); }

  static HWY_INLINE I MulAdd(I partial, I w_u8, I x_s8) {
    if constexpr (kVnni)
      return _mm512_dpbusd_epi32(partial, w_u8, x_s8);
    else
      return _mm512_add_epi16(partial, _mm512_maddubs_epi16(w_u8, x_s8));
  }
  static HWY_INLINE I Widen(I acc, I partial) {
    if constexpr (kVnni)
      return _mm512_add_epi32(acc, partial);
    else
      return _mm512_add_epi32(acc, _mm512_madd_epi16(partial, _mm512_set1_epi16(1)));
  }
  static HWY_INLINE I MulAddWiden(I acc, I w_u8, I x_s8) {
    if constexpr (kVnni)
      return _mm512_dpbusd_epi32(acc, w_u8, x_s8);
    else
      return Widen(acc, _mm512_maddubs_epi16(w_u8, x_s8));
  }
  static HWY_INLINE I Magnitude(I w) { return _mm512_abs_epi8(w); }
  // AVX-512 has no vpsignb: negate x where w < 0 (where w = 0, |w| = 0 makes the product 0).
  static HWY_INLINE I WithSignOf(I x, I w) {
    return _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  }

  static HWY_INLINE void StoreF(float* p, F v) { _mm512_storeu_ps(p, v); }
  static HWY_INLINE F LoadF(const float* p) { return _mm512_loadu_ps(p); }
  static HWY_INLINE F SetF(float v) { return _mm512_set1_ps(v); }
  static HWY_INLINE F ZeroF() { return _mm512_setzero_ps(); }
  static HWY_INLINE F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static HWY_INLINE F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static HWY_INLINE F Neg(F a) {
    return _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
  }
  static HWY_INLINE F ToF(I a) { return _mm512_cvtepi32_ps(a); }
  static HWY_INLINE F HalvesToF(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static HWY_INLINE F U8ToF(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static HWY_INLINE F S8ToF(const uint8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};
#endif

// 256-bit VNNI (vpdpbusd on ymm) measured 5-15 % below the 512-bit form on a Sapphire-Rapids-class
// Xeon (one thread, from L2), so AVX-512 targets take zmm throughout.
#if HWY_TARGET <= HWY_AVX3_DL
using Int8Lanes = Avx512Lanes<true>;
#elif HWY_TARGET <= HWY_AVX3
using Int8Lanes = Avx512Lanes<false>;
#else
using Int8Lanes = Avx2Lanes;
#endif

#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

#if HWY_ARCH_ARM_A64

// NEON without the dot-product extension (Armv8.0): bytes widen to int16, multiply exactly
// (|255 · 128| < 2^15) and pairwise adds take each output's four products to int32 — the same
// integers as VNNI's quad sums. NEON is part of the base architecture, so this serves every
// AArch64 core (the build compiles no SVE targets: cmake/RltDependencies.cmake).
struct NeonLanes {
  using I = int32x4_t;
  using F = float32x4_t;
  static constexpr const char* kName = "NEON widening multiplies";
  static constexpr int kLanes = 4;
  static constexpr int kTileVectors = 2;
  static constexpr bool kInt32Quads = true;
  static constexpr bool kSignedWeights = false;

  static HWY_INLINE I Load(const uint8_t* p) { return vreinterpretq_s32_u8(vld1q_u8(p)); }
  static HWY_INLINE I Broadcast4(const int8_t* p) { return vdupq_n_s32(Read4(p)); }
  static HWY_INLINE I Zero() { return vdupq_n_s32(0); }
  static HWY_INLINE I Bytes(uint8_t c) { return vreinterpretq_s32_u8(vdupq_n_u8(c)); }
  static HWY_INLINE I Set32(int32_t v) { return vdupq_n_s32(v); }
  static HWY_INLINE I And(I a, I b) { return vandq_s32(a, b); }
  static HWY_INLINE I Or(I a, I b) { return vorrq_s32(a, b); }
  static HWY_INLINE I Xor(I a, I b) { return veorq_s32(a, b); }
  template <int kBits>
  static HWY_INLINE I Shr16(I a) {
    return vreinterpretq_s32_u16(vshrq_n_u16(vreinterpretq_u16_s32(a), kBits));
  }
  static HWY_INLINE I Sub32(I a, I b) { return vsubq_s32(a, b); }

  // Lanes hold (output, column) bytes as o0c0 o0c1 o0c2 o0c3 o1c0 ...: the products of each half
  // add pairwise to (o c01, o c23) and once more across the halves to one sum per output.
  static HWY_INLINE I MulAdd(I partial, I w_u8, I x_s8) {
    const uint8x16_t w = vreinterpretq_u8_s32(w_u8);
    const int8x16_t x = vreinterpretq_s8_s32(x_s8);
    const int16x8_t lo =
        vmulq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(w))), vmovl_s8(vget_low_s8(x)));
    const int16x8_t hi = vmulq_s16(vreinterpretq_s16_u16(vmovl_high_u8(w)), vmovl_high_s8(x));
    return vaddq_s32(partial, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
  }
  static HWY_INLINE I Widen(I acc, I partial) { return vaddq_s32(acc, partial); }
  static HWY_INLINE I MulAddWiden(I acc, I w_u8, I x_s8) { return MulAdd(acc, w_u8, x_s8); }
  // |−128| wraps to the byte 0x80, read as the unsigned 128 it is.
  static HWY_INLINE I Magnitude(I w) {
    return vreinterpretq_s32_s8(vabsq_s8(vreinterpretq_s8_s32(w)));
  }
  static HWY_INLINE I WithSignOf(I x, I w) {
    const int8x16_t xb = vreinterpretq_s8_s32(x);
    return vreinterpretq_s32_s8(vbslq_s8(vcltzq_s8(vreinterpretq_s8_s32(w)), vnegq_s8(xb), xb));
  }

  static HWY_INLINE void StoreF(float* p, F v) { vst1q_f32(p, v); }
  static HWY_INLINE F LoadF(const float* p) { return vld1q_f32(p); }
  static HWY_INLINE F SetF(float v) { return vdupq_n_f32(v); }
  static HWY_INLINE F ZeroF() { return vdupq_n_f32(0.0f); }
  static HWY_INLINE F Mul(F a, F b) { return vmulq_f32(a, b); }
  static HWY_INLINE F Fma(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static HWY_INLINE F Neg(F a) { return vnegq_f32(a); }
  static HWY_INLINE F ToF(I a) { return vcvtq_f32_s32(a); }
  static HWY_INLINE F HalvesToF(const uint8_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
  }
  static HWY_INLINE F U8ToF(const uint8_t* p) {
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(Four(p)))));
  }
  static HWY_INLINE F S8ToF(const uint8_t* p) {
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(Four(p))))));
  }

 private:
  // Four bytes from p in the low lanes (the load reads no further).
  static HWY_INLINE uint8x8_t Four(const uint8_t* p) {
    return vreinterpret_u8_s32(vdup_n_s32(Read4(p)));
  }
};

using Int8Lanes = NeonLanes;

// Armv8.2's dot-product extension: sdot sums the four signed byte products of each 32-bit lane
// into it, one instruction for NeonLanes::MulAdd's eight. Compiled for Armv8.2 with the extension
// (as arm_neon.h declares sdot; every core with it implements Armv8.2 at least) and Highway's
// NEON "+crypto", as is the kernel instantiated with it (linear_quant_int8.cpp), and run only
// where the CPU reports the extension (CpuHasDotProduct).
#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod+crypto")
struct NeonDotLanes : NeonLanes {
  static constexpr const char* kName = "NEON sdot";
  // Q8_0's weights go in as the signed bytes they are (no sign form, no bias).
  static constexpr bool kSignedWeights = true;

  static HWY_INLINE I MulAdd(I partial, I w, I x_s8) {
    return vdotq_s32(partial, vreinterpretq_s8_s32(w), vreinterpretq_s8_s32(x_s8));
  }
  static HWY_INLINE I MulAddWiden(I acc, I w, I x_s8) { return MulAdd(acc, w, x_s8); }
};
#pragma GCC pop_options

// Whether this core has the dot-product extension (Linux reports it in the auxiliary vector).
HWY_INLINE bool CpuHasDotProduct() {
#if defined(__linux__)
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
#else
  return false;
#endif
}

#endif  // HWY_ARCH_ARM_A64

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#endif  // RLT_KERNELS_CPU_INT8_LANES_INL_H_
