#include "quant/quantize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"

namespace rlt::quant {
namespace {

constexpr int kSuper = 256;  // values per K-quant super-block

// Round to nearest, ties to even, as ggml's nearest_int (valid for |v| < 2^22).
int nearest_int(float v) {
  float shifted = v + 12582912.0f;  // 1.5 · 2^23: the integer lands in the low mantissa bits
  int32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return (bits & 0x007fffff) - 0x00400000;
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// block_q8_0: d = absmax / 127 (f16), q = round(x / d) away from zero.
void q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int j = 0; j < 32; ++j) {
    // roundf, half away from zero, without its library call (the K/V cache quantizes every row
    // it writes): |v| <= 127, so the truncation is exact and so is the fraction v - t.
    const float v = x[j] * id;
    auto t = static_cast<int>(v);
    const float frac = v - static_cast<float>(t);
    t += frac >= 0.5f ? 1 : frac <= -0.5f ? -1 : 0;
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(t));
  }
}

// The scale and min (returned as a non-negative amount subtracted) of n values on 0..nmax that
// minimize the weighted squared error: the plain min/max fit, then nstep + 1 candidate scales
// around it, each refit by weighted least squares (ggml's make_qkx2_quants).
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* levels,
                    float* min_out, float rmin, float rdelta, int nstep) {
  float lo = x[0], hi = x[0], sum_w = w[0], sum_x = w[0] * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(levels, levels + n, 0);
    *min_out = -lo;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (hi - lo);
  float scale = 1.0f / iscale;
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax));
    const float diff = scale * levels[i] + lo - x[i];
    best += w[i] * diff * diff;
  }
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (hi - lo);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * static_cast<float>(l);
      sum_l2 += w[i] * static_cast<float>(l * l);
      sum_xl += w[i] * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * trial[i] + this_min - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best) {
      std::copy(trial, trial + n, levels);
      best = err;
      scale = this_scale;
      lo = this_min;
    }
  }
  *min_out = -lo;
  return scale;
}

// block_q4_K: f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins, 128 bytes of nibbles.
void q4_k(const float* x, uint8_t* b) {
  float scales[8], mins[8], weights[32];
  uint8_t levels[kSuper];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float rms = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(xs[l]);
    scales[j] = fit_scale_min(32, 15, xs, weights, levels + 32 * j, &mins[j], -1.0f, 0.1f, 20);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* packed = b + 4;
  std::memset(packed, 0, 12);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    mn[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
    // get_scale_min_k4's layout: the first four in bytes 0..7, the rest split into nibbles of
    // bytes 8..11 with their top two bits in the high bits of bytes 0..7.
    if (j < 4) {
      packed[j] = sc[j];
      packed[j + 4] = mn[j];
    } else {
      packed[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      packed[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
    }
  }
  put_half(b, max_scale / 63.0f);
  put_half(b + 2, max_min / 63.0f);
  const float d = f16_bytes_to_f32(b), dmin = f16_bytes_to_f32(b + 2);
  for (int j = 0; j < 8; ++j) {
    const float dj = d * static_cast<float>(sc[j]);
    if (dj == 0.0f) continue;  // keeps the fit's levels, as ggml does
    const float mj = dmin * static_cast<float>(mn[j]);
    for (int l = 0; l < 32; ++l)
      levels[32 * j + l] =
          static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + mj) / dj), 0, 15));
  }
  uint8_t* q = b + 16;
  for (int j = 0; j < kSuper; j += 64, q += 32)
    for (int l = 0; l < 32; ++l)
      q[l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
}

// A signed scale for n values on -nmax..nmax-1 (stored + nmax), weighted by x² (ggml's
// make_qx_quants with rmse_type 1): 19 candidate scales around -nmax / max, each refit.
float fit_signed_scale(int n, int nmax, const float* x, uint8_t* levels) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax < 1e-15f) {
    std::fill(levels, levels + n, 0);
    return 0.0f;
  }
  auto fit = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = 0;
    *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * static_cast<float>(l);
      *suml2 += w * static_cast<float>(l * l);
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      levels[i] =
          static_cast<uint8_t>(nmax + std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx, suml2;
  fit(iscale, &sumlx, &suml2);
  assign(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    fit(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// block_q6_K: 128 bytes of low nibbles, 64 bytes of top-two-bit pairs, 16 int8 scales, f16 d.
void q6_k(const float* x, uint8_t* b) {
  uint8_t levels[kSuper];
  float scales[16];
  float max_scale = 0, max_abs = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_signed_scale(16, 32, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > max_abs) {
      max_abs = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  std::memset(b, 0, 210);
  if (max_abs < 1e-15f) return;  // all zero: d = 0
  const float iscale = -128.0f / max_scale;
  put_half(b + 208, 1.0f / iscale);
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int j = 0; j < 16; ++j)
    sc[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
  const float d = f16_bytes_to_f32(b + 208);
  for (int j = 0; j < 16; ++j) {
    const float dj = d * static_cast<float>(sc[j]);
    if (dj == 0.0f) continue;
    for (int l = 0; l < 16; ++l)
      levels[16 * j + l] =
          static_cast<uint8_t>(std::clamp(nearest_int(x[16 * j + l] / dj), -32, 31) + 32);
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int j = 0; j < kSuper; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* L = levels + j + l;
      ql[l] = static_cast<uint8_t>((L[0] & 0xF) | ((L[64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((L[32] & 0xF) | ((L[96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((L[0] >> 4) | ((L[32] >> 4) << 2) | ((L[64] >> 4) << 4) |
                                   ((L[96] >> 4) << 6));
    }
  }
}

}  // namespace

bool can_quantize(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_K || type == GgmlType::kQ6_K ||
         type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16;
}

Status quantize_row(GgmlType type, const float* src, int64_t elems, uint8_t* dst) {
  if (!can_quantize(type))
    return unimplemented(
        fmt::format("rlt cannot quantize into {} (accepted: Q8_0, Q4_K, Q6_K, F32, F16, BF16)",
                    ggml_type_name(type)));
  if (type == GgmlType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(elems) * 4);
    return {};
  }
  if (type == GgmlType::kF16 ||
      type == GgmlType::kBF16) {  // nearest even, as dequantize_row's inverse
    for (int64_t i = 0; i < elems; ++i) {
      const uint16_t v = type == GgmlType::kF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      std::memcpy(dst + 2 * i, &v, 2);
    }
    return {};
  }
  const auto info = *ggml_type_info(static_cast<uint32_t>(type));
  if (elems % info.block_elems != 0)
    return invalid_argument(fmt::format("{} values are not a whole number of {} blocks of {}",
                                        elems, info.name, info.block_elems));
  for (int64_t b = 0; b < elems / info.block_elems; ++b) {
    const float* x = src + b * info.block_elems;
    uint8_t* out = dst + b * info.block_bytes;
    switch (type) {
      case GgmlType::kQ8_0:
        q8_0(x, out);
        break;
      case GgmlType::kQ4_K:
        q4_k(x, out);
        break;
      default:
        q6_k(x, out);
        break;
    }
  }
  return {};
}

}  // namespace rlt::quant
