#include "quant/dequantize.h"

#include <fmt/format.h>

#include <cstring>

#include "common/half.h"

namespace rlt::quant {
namespace {

constexpr int kQK = 32;    // values per block of the simple types
constexpr int kQKK = 256;  // values per super-block of the K-quants

// block_q4_0: f16 d, 16 bytes of nibbles (value j in the low nibble of byte j, j+16 in the high).
void q4_0(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + kQK / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// block_q4_1: f16 d, f16 m, 16 bytes of nibbles; value = d * q + m.
void q4_1(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b), m = f16_bytes_to_f32(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + kQK / 2] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// block_q5_0: f16 d, u32 of fifth bits (bit j for value j), 16 bytes of nibbles; q - 16.
void q5_0(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + kQK / 2] = d * static_cast<float>(hi - 16);
  }
}

// block_q5_1: f16 d, f16 m, u32 of fifth bits, 16 bytes of nibbles; value = d * q + m.
void q5_1(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b), m = f16_bytes_to_f32(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
    y[j] = d * static_cast<float>(lo) + m;
    y[j + kQK / 2] = d * static_cast<float>(hi) + m;
  }
}

// block_q8_0: f16 d, 32 int8.
void q8_0(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b);
  const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int j = 0; j < kQK; ++j) y[j] = d * static_cast<float>(qs[j]);
}

// block_q2_K: 16 bytes of 4-bit scale | 4-bit min, 64 bytes of 2-bit values, f16 d, f16 dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = f16_bytes_to_f32(b + 80), dmin = f16_bytes_to_f32(b + 82);
  int is = 0;
  for (int n = 0; n < kQKK; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// block_q3_K: 32 bytes of high-bit masks, 64 bytes of 2-bit values, 12 bytes of 6-bit scales, f16
// d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = f16_bytes_to_f32(b + 108);
  // Scale k: low 4 bits from byte k (k < 8) or the high nibble of byte k - 8; top 2 bits from
  // byte 8 + k % 4 at bit 2 * (k / 4). Stored with an offset of 32.
  int scales[16];
  for (int k = 0; k < 16; ++k) {
    const int low = k < 8 ? packed[k] & 0xF : packed[k - 8] >> 4;
    const int high = (packed[8 + k % 4] >> (2 * (k / 4))) & 3;
    scales[k] = (low | (high << 4)) - 32;
  }
  int is = 0;
  int bit = 0;
  for (int n = 0; n < kQKK; n += 128) {
    for (int shift = 0; shift < 8; shift += 2, ++bit) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * static_cast<float>(scales[is++]);
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * half;
          const int v = ((q[i] >> shift) & 3) - (((hm[i] >> bit) & 1) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
    }
    q += 32;
  }
}

// The K-quants' 12 bytes of eight 6-bit scales and eight 6-bit mins (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// block_q4_K: f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles.
void q4_k(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b), dmin = f16_bytes_to_f32(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, q += 32) {
    int sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

// block_q5_K: f16 d, f16 dmin, 12 bytes of scales/mins, 32 bytes of fifth bits, 128 of nibbles.
void q5_k(const uint8_t* b, float* y) {
  const float d = f16_bytes_to_f32(b), dmin = f16_bytes_to_f32(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  unsigned u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < kQKK; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
    int sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
  }
}

// block_q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales, f16 d.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_bytes_to_f32(b + 208);
  for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_fn(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
      return q4_0;
    case GgmlType::kQ4_1:
      return q4_1;
    case GgmlType::kQ5_0:
      return q5_0;
    case GgmlType::kQ5_1:
      return q5_1;
    case GgmlType::kQ8_0:
      return q8_0;
    case GgmlType::kQ2_K:
      return q2_k;
    case GgmlType::kQ3_K:
      return q3_k;
    case GgmlType::kQ4_K:
      return q4_k;
    case GgmlType::kQ5_K:
      return q5_k;
    case GgmlType::kQ6_K:
      return q6_k;
    default:
      return nullptr;
  }
}

}  // namespace

Status dequantize_row(GgmlType type, const uint8_t* src, int64_t elems, float* dst) {
  auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info || !info->dequantizable)
    return unimplemented(fmt::format("rlt cannot dequantize GGML type {}", ggml_type_name(type)));
  if (elems % info->block_elems != 0) {
    return invalid_argument(fmt::format("{} values are not a whole number of {} blocks of {}",
                                        elems, info->name, info->block_elems));
  }
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(elems) * 4);
      return {};
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < elems; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = type == GgmlType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return {};
    default:
      break;
  }
  const BlockFn fn = block_fn(type);
  for (int64_t b = 0; b < elems / info->block_elems; ++b)
    fn(src + b * info->block_bytes, dst + b * info->block_elems);
  return {};
}

}  // namespace rlt::quant
