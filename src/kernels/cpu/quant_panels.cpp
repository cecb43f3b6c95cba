#include "kernels/cpu/quant_panels.h"

#include <cstring>

#include "common/half.h"

namespace rlt::kernels {
namespace {

using quant::GgmlType;

constexpr int64_t kPanelOutputs = 64;  // PackedMatrix::kPanelWidth (kept free of that header)

// A GGML block taken apart: raw f16 fields, per-group scales and mins, and each column's quant
// as stored (unsigned, before any offset; Q8_0 as the signed byte's bits).
struct UnpackedBlock {
  uint16_t d = 0, m = 0;
  uint8_t scales[16] = {}, mins[16] = {};
  uint8_t q[256] = {};
};

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ggml's get_scale_min_k4: eight 6-bit scales and eight 6-bit mins in 12 bytes.
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void unpack_block(GgmlType type, const uint8_t* b, UnpackedBlock* u) {
  switch (type) {
    case GgmlType::kQ8_0:
      u->d = u16_at(b);
      std::memcpy(u->q, b + 2, 32);
      return;
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: {
      const bool with_min = type == GgmlType::kQ4_1;
      u->d = u16_at(b);
      if (with_min) u->m = u16_at(b + 2);
      const uint8_t* qs = b + (with_min ? 4 : 2);
      for (int j = 0; j < 16; ++j) {
        u->q[j] = qs[j] & 0xF;
        u->q[j + 16] = qs[j] >> 4;
      }
      return;
    }
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool with_min = type == GgmlType::kQ5_1;
      u->d = u16_at(b);
      if (with_min) u->m = u16_at(b + 2);
      uint32_t qh;
      std::memcpy(&qh, b + (with_min ? 4 : 2), 4);
      const uint8_t* qs = b + (with_min ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        u->q[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) & 1u) << 4));
        u->q[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4));
      }
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool five = type == GgmlType::kQ5_K;
      u->d = u16_at(b);
      u->m = u16_at(b + 2);
      const uint8_t* scales = b + 4;
      for (int g = 0; g < 8; ++g) scale_min_k4(g, scales, &u->scales[g], &u->mins[g]);
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int c = 0; c < 4; ++c) {  // 64 columns: 32 low nibbles, then 32 high nibbles
        for (int l = 0; l < 32; ++l) {
          uint8_t lo = qs[32 * c + l] & 0xF, hi = qs[32 * c + l] >> 4;
          if (five) {
            if (qh[l] & (1u << (2 * c))) lo |= 16;
            if (qh[l] & (2u << (2 * c))) hi |= 16;
          }
          u->q[64 * c + l] = lo;
          u->q[64 * c + 32 + l] = hi;
        }
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      std::memcpy(u->scales, b + 192, 16);
      u->d = u16_at(b + 208);
      for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 32; ++l) {
          const uint8_t a = ql[64 * h + l], c = ql[64 * h + l + 32], hb = qh[32 * h + l];
          uint8_t* q = u->q + 128 * h + l;
          q[0] = static_cast<uint8_t>((a & 0xF) | ((hb & 3) << 4));
          q[32] = static_cast<uint8_t>((c & 0xF) | (((hb >> 2) & 3) << 4));
          q[64] = static_cast<uint8_t>((a >> 4) | (((hb >> 4) & 3) << 4));
          q[96] = static_cast<uint8_t>((c >> 4) | (((hb >> 6) & 3) << 4));
        }
      }
      return;
    }
    default:
      return;
  }
}

}  // namespace

void pack_quant_row(const QuantPanelFormat& f, const uint8_t* row_blocks, int64_t cols,
                    uint8_t* panel, int64_t slot, QuantArrangement arrangement) {
  const QuantBlockLayout l = quant_block_layout(f);
  const auto info = quant::ggml_type_info(static_cast<uint32_t>(f.type));
  const int64_t groups = f.block_cols / f.group_cols;
  const bool quads = arrangement == QuantArrangement::kQuads;
  UnpackedBlock u;
  for (int64_t b = 0; b < cols / f.block_cols; ++b) {
    unpack_block(f.type, row_blocks + b * info->block_bytes, &u);
    uint8_t* dst = panel + b * f.block_bytes;
    std::memcpy(dst + l.d + 2 * slot, &u.d, 2);
    if (l.m >= 0) std::memcpy(dst + l.m + 2 * slot, &u.m, 2);
    for (int64_t g = 0; g < groups && l.scales >= 0; ++g) {
      dst[l.scales + g * kPanelOutputs + slot] = u.scales[g];
      if (l.mins >= 0) dst[l.mins + g * kPanelOutputs + slot] = u.mins[g];
    }
    if (f.quant_bits == 4 && l.bytes8 < 0) {
      // Column octets in both arrangements (quant_panels.h), two nibbles per byte written whole:
      // Q4_0, Q4_1 and Q4_K, what most GGUF files hold, pack in half the time of the element
      // loop below.
      auto pair = [&](int64_t lo, int64_t hi) {
        return static_cast<uint8_t>((u.q[lo] & 0xF) | ((u.q[hi] & 0xF) << 4));
      };
      for (int64_t c = 0; c < f.block_cols; c += 8)
        for (int64_t j = 0; j < 4; ++j)
          dst[l.nibbles + (c / 8) * 4 * kPanelOutputs + 4 * slot + j] = pair(c + j, c + 4 + j);
      continue;
    }
    for (int64_t c = 0; c < f.block_cols; ++c) {
      const uint8_t q = u.q[c];
      if (quads) {  // see quant_panels.h: 4 adjacent bytes per output and column quad
        const int64_t lane = 4 * slot + c % 4;
        if (l.bytes8 >= 0) {
          dst[l.bytes8 + (c / 4) * 4 * kPanelOutputs + lane] = q;
          continue;
        }
        // 5- and 6-bit quants: carrier quads (quant_panels.h), from the start of the nibbles.
        const int64_t quad = c % f.group_cols / 4;
        const int64_t carriers = f.quant_bits == 5 ? 5 : 3;
        uint8_t* group = dst + l.nibbles + (c / f.group_cols) * carriers * 4 * kPanelOutputs + lane;
        auto put = [&](int64_t carrier, int bits) {
          group[carrier * 4 * kPanelOutputs] |= static_cast<uint8_t>(bits);
        };
        if (quad < carriers) {
          put(quad, q);
        } else if (f.quant_bits == 5) {  // quads 5, 6, 7 in the carriers' top three bits
          if (quad == 7) {
            put(2, (q & 7) << 5);
            put(3, ((q >> 3) & 1) << 7);
            put(4, ((q >> 4) & 1) << 7);
          } else {
            put(quad - 5, (q & 7) << 5);
            put(quad - 2, ((q >> 3) & 3) << 5);
          }
        } else {  // Q6_K's quad 3 in the carriers' top two bits
          for (int64_t j = 0; j < 3; ++j) put(j, ((q >> (2 * j)) & 3) << 6);
        }
        continue;
      }
      if (l.bytes8 >= 0) {
        dst[l.bytes8 + c * kPanelOutputs + slot] = q;
        continue;
      }
      // Only Q5_K and Q6_K come here (4-bit quants were written whole above): packed fields
      // (quant_panels.h), bit i of column c's field at bit b·(c % group) + i of its group's
      // dwords (little-endian: dword bit j is bit j % 8 of byte j / 8).
      const int bits = f.quant_bits;
      const int64_t dwords = f.group_cols * bits / 32;
      uint8_t* group = dst + l.nibbles + (c / f.group_cols) * dwords * 4 * kPanelOutputs + 4 * slot;
      for (int i = 0; i < bits; ++i) {
        const int64_t bit = bits * (c % f.group_cols) + i;
        group[bit / 32 * 4 * kPanelOutputs + bit % 32 / 8] |=
            static_cast<uint8_t>(((q >> i) & 1) << (bit % 8));
      }
    }
  }
}

void quant_row_terms(const QuantPanelFormat& f, const uint8_t* row_blocks, int64_t cols, float* q,
                     float* scale, float* offset) {
  const auto info = quant::ggml_type_info(static_cast<uint32_t>(f.type));
  const int64_t groups = f.block_cols / f.group_cols;
  UnpackedBlock u;
  for (int64_t b = 0; b < cols / f.block_cols; ++b) {
    unpack_block(f.type, row_blocks + b * info->block_bytes, &u);
    const float d = f16_to_f32(u.d), m = f16_to_f32(u.m);
    for (int64_t c = 0; c < f.block_cols; ++c) {
      const int v = (f.quant_bits == 8 ? static_cast<int8_t>(u.q[c]) : u.q[c]) - f.q_offset;
      q[b * f.block_cols + c] = static_cast<float>(v);
    }
    for (int64_t g = 0; g < groups; ++g) {
      float s = d, o = 0.0f;
      if (f.type == quant::GgmlType::kQ4_1 || f.type == quant::GgmlType::kQ5_1) {
        o = m;
      } else if (f.type == quant::GgmlType::kQ6_K) {
        s = d * static_cast<float>(static_cast<int8_t>(u.scales[g]));
      } else if (f.block_cols == 256) {
        s = d * static_cast<float>(u.scales[g]);
        o = -(m * static_cast<float>(u.mins[g]));
      }
      scale[b * groups + g] = s;
      offset[b * groups + g] = o;
    }
  }
}

}  // namespace rlt::kernels
