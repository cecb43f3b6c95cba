#include "kernels/cpu/swiglu.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/swiglu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <bit>
#include <cmath>
#include <limits>

// The constants of both forms. Defined once (the file is compiled once per target).
#ifndef RLT_KERNELS_CPU_SWIGLU_CONSTANTS_
#define RLT_KERNELS_CPU_SWIGLU_CONSTANTS_
namespace rlt::kernels::swiglu_constants {
// ln(FLT_MAX) rounded down to a float: the largest x whose e^x is finite in f32.
constexpr float kHi = 88.72283172607421875f;
// 126 · ln 2 rounded up: the smallest x whose e^x is a normal f32 (the scale below needs n ≥ -126).
constexpr float kLo = -87.33654022216796875f;
constexpr float kLog2e = 1.44269504088896341f;
// ln 2 in two parts (Cody–Waite): n · kLn2Hi is exact for |n| ≤ 128, so x - n·ln 2 loses little.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
// Cephes expf: e^r ≈ 1 + r + r²·P(r) for |r| ≤ ln 2 / 2, P of degree 5 (highest first).
constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace rlt::kernels::swiglu_constants
#endif

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp_f32 on a vector, step for step as the scalar form (swiglu.h) except NaN, whose result
// SiluMulRows never depends on (g / anything is NaN when g is).
template <class D, class V = hn::VFromD<D>>
HWY_INLINE V ExpF32(D d, V x) {
  using namespace swiglu_constants;
  const hn::RebindToSigned<D> di;
  const V xc = hn::Min(hn::Max(x, hn::Set(d, kLo)), hn::Set(d, kHi));
  const V n = hn::Round(hn::Mul(xc, hn::Set(d, kLog2e)));
  V r = hn::Sub(xc, hn::Mul(n, hn::Set(d, kLn2Hi)));
  r = hn::Sub(r, hn::Mul(n, hn::Set(d, kLn2Lo)));
  V poly = hn::Set(d, kP[0]);
  for (int i = 1; i < 6; ++i) poly = hn::Add(hn::Mul(poly, r), hn::Set(d, kP[i]));
  const V p = hn::Add(hn::Add(hn::Mul(poly, hn::Mul(r, r)), r), hn::Set(d, 1.0f));
  // 2^n as 2^(n-1) · 2 when n > 0, so that n = 128 (e^x near FLT_MAX) still has an exponent field.
  const auto ni = hn::ConvertTo(di, n);
  const auto above_one = hn::Gt(ni, hn::Zero(di));
  const auto biased =
      hn::Sub(hn::Add(ni, hn::Set(di, 127)), hn::IfThenElseZero(above_one, hn::Set(di, 1)));
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(biased));
  const V twice = hn::IfThenElse(hn::RebindMask(d, above_one), hn::Set(d, 2.0f), hn::Set(d, 1.0f));
  V e = hn::Mul(hn::Mul(p, scale), twice);
  e = hn::IfThenElse(hn::Gt(x, hn::Set(d, kHi)), hn::Set(d, std::numeric_limits<float>::infinity()),
                     e);
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, kLo)), e);
}

void SiluMulRows(const float* g, const float* u, int64_t n, float* out) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto gv = hn::LoadU(d, g + i);
    const auto e = ExpF32(d, hn::Neg(gv));
    hn::StoreU(hn::Mul(hn::Div(gv, hn::Add(hn::Set(d, 1.0f), e)), hn::LoadU(d, u + i)), d, out + i);
  }
  for (; i < n; ++i) out[i] = silu_mul(g[i], u[i]);  // the same bits, one at a time
}

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rlt::kernels {

HWY_EXPORT(SiluMulRows);

float exp_f32(float x) {
  using namespace swiglu_constants;
  if (std::isnan(x)) return x;
  if (x > kHi) return std::numeric_limits<float>::infinity();
  if (x < kLo) return 0.0f;
  const float n = std::nearbyint(x * kLog2e);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float poly = kP[0];
  for (int i = 1; i < 6; ++i) poly = poly * r + kP[i];
  const float p = poly * (r * r) + r + 1.0f;
  const auto ni = static_cast<int32_t>(n);
  const int32_t above_one = ni > 0 ? 1 : 0;
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(ni + 127 - above_one) << 23);
  return p * scale * (above_one ? 2.0f : 1.0f);
}

float silu_mul(float g, float u) {
  return g / (1.0f + exp_f32(-g)) * u;
}

void silu_mul(const float* g, const float* u, int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SiluMulRows)(g, u, n, out);
}

}  // namespace rlt::kernels
#endif
