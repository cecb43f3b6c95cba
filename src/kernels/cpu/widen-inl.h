// Per-target helpers that load f32 / bf16 / f16 data widened to f32 vectors. Included from
// Highway dispatch units (linear.cpp, attention/cpu_flash.cpp) inside their target loop, hence
// the Highway re-inclusion guard instead of #pragma once.
#if defined(RLT_KERNELS_CPU_WIDEN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RLT_KERNELS_CPU_WIDEN_INL_H_
#undef RLT_KERNELS_CPU_WIDEN_INL_H_
#else
#define RLT_KERNELS_CPU_WIDEN_INL_H_
#endif

#include <hwy/highway.h>

#include "common/half.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// N consecutive elements widened to f32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWidened(DF df, const float* p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWidened(DF df, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  return hn::PromoteTo(df, hn::LoadU(dbf, p));
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadWidened(DF df, const hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}

template <typename T>
HWY_INLINE uint16_t Bits16(T v) {
  uint16_t bits;
  hwy::CopySameSize(&v, &bits);
  return bits;
}
// One element widened to f32 (scalar tails).
HWY_INLINE float WidenScalar(float v) { return v; }
HWY_INLINE float WidenScalar(hwy::bfloat16_t v) { return bf16_to_f32(Bits16(v)); }
HWY_INLINE float WidenScalar(hwy::float16_t v) { return f16_to_f32(Bits16(v)); }

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#endif  // RLT_KERNELS_CPU_WIDEN_INL_H_
