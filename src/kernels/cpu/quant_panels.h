// GGML block-quantized weights re-laid out once at load into rlt's own panel format, so that the
// quantized kernel (linear_quant.cpp) reads them the way the float kernel reads its panels:
// kPanelWidth outputs side by side, input columns in order.
//
// A panel is a sequence of blocks along the input columns (32 columns for Q8_0 / Q4_0 / Q4_1 /
// Q5_0 / Q5_1, 256 for the K-quants). One block of a panel holds, for all 64 outputs, the source
// blocks' scale fields (each field as an array over the 64 outputs) followed by the quants, column
// by column, 64 outputs per column:
//   - 4-bit quants (Q4_0, Q4_1, Q4_K): in column octets, in both arrangements: 4 bytes per output
//     for each 8 columns, 64 outputs after one another (256 bytes per octet), column 8j + i in
//     the low nibble of byte i and 8j + 4 + i in its high one — a 32-bit lane is one output's 8
//     columns, so the f32 kernel loads a vector of outputs with no widening;
//   - 8-bit quants (and Q5_0 / Q5_1's, as stored unsigned): one byte per output per column;
//   - 5- and 6-bit quants (Q5_K, Q6_K): packed fields, W = G·b/32 32-bit words per output for
//     each group of G columns (Q5_K: b = 5, G = 32, W = 5; Q6_K: b = 6, G = 16, W = 3), word i of
//     group j at nibbles + 256 (W j + i) + 4 slot, column G j + c in bits b c .. b c + b − 1 of
//     the group's G·b bits (word i holding bits 32 i .. 32 i + 31), so that each column is a
//     shift or two from a whole value in its output's 32-bit lane (a few per group span two
//     words); the field holds q as stored (Q6_K's offset of 32 is the kernel's to subtract).
// Every block is the same size per output as the GGML block it came from (Q4_K and Q5_K: 4 bytes
// more per 256 weights, their 6-bit scales unpacked to bytes), so a decode step streams the file's
// bytes, no more — except Q5_0 / Q5_1, whose quants are widened to a byte each (34 / 36 bytes per
// 32 weights instead of 22 / 24): a fifth bit per column costs more to extract than the bytes it
// saves, and llama.cpp's quantizer writes Q5_0 where a K-quant does not divide a row.
//
// The int8-activation kernel (linear_quant_int8.cpp) reads the same blocks with the quants in a
// second arrangement (QuantArrangement::kQuads), the one integer dot products want: each output's
// 4 consecutive columns in 4 adjacent bytes, 64 outputs after one another (256 bytes per column
// quad; a 32-byte load is 8 outputs x 4 columns):
//   - 8-bit quants: column quad j (columns 4j..4j+3) at bytes8 + 256 j + 4 slot + (c % 4);
//   - 4-bit quants: the column octets above (octet j at nibbles + 256 j + 4 slot + (c % 4),
//     columns 8j..8j+3 in the low nibbles, 8j+4..8j+7 in the high ones);
//   - 5- and 6-bit quants (Q5_K, Q6_K): "carrier" quads, so that most columns come out of a byte
//     with one mask. Group j (32 columns for Q5_K, 16 for Q6_K, quads 0..7 or 0..3) has C
//     carriers (Q5_K 5, Q6_K 3), carrier i at nibbles + 256 (C j + i) + 4 slot + (c % 4): its
//     low bits are quad i's quant, its top bits (Q5_K 3, Q6_K 2) slices of the other quads':
//       Q5_K quad 5 = carrier 0's top 3 bits | carrier 3's bits 5-6 << 3,
//            quad 6 = carrier 1's top 3 bits | carrier 4's bits 5-6 << 3,
//            quad 7 = carrier 2's top 3 bits | carrier 3's bit 7 << 3 | carrier 4's bit 7 << 4;
//       Q6_K quad 3 = carrier 0's top 2 bits | carrier 1's << 2 | carrier 2's << 4.
//     The carriers fill the nibbles and the high field together (same bytes in all), as the
//     packed fields do in the first arrangement.
// Fields and sizes are the same in both arrangements.
//
// The value of weight (n, k) is scale(g) · q + offset(g) for the group g of 32 (Q6_K: 16)
// columns holding k, exactly the dequantization ggml defines:
//   Q8_0: d · q                     (q signed 8-bit)
//   Q4_0: d · (q − 8)
//   Q4_1: d · q + m
//   Q5_0: d · (q − 16)              (q 5-bit)
//   Q5_1: d · q + m
//   Q4_K / Q5_K: (d · sc) · q − (dmin · m)   (sc, m: the group's 6-bit scale and min)
//   Q6_K: (d · sc) · (q − 32)                (sc: the group's signed 8-bit scale)
#pragma once

#include <cstdint>
#include <optional>

#include "quant/ggml_type.h"

namespace rlt::kernels {

struct QuantPanelFormat {
  quant::GgmlType type;
  int64_t block_cols;   // input columns per block (32 or 256)
  int64_t group_cols;   // columns sharing one scale (32, Q6_K 16)
  int64_t block_bytes;  // bytes of one block of a 64-output panel
  int quant_bits;       // 4, 5, 6 or 8
  int q_offset;         // subtracted from the stored unsigned quant (Q4_0 8, Q5_0 16, Q6_K 32)
  bool has_offset;      // a per-group additive term (Q4_1, Q5_1, Q4_K, Q5_K)
};

// The panel format of a GGML type; nullopt for types the quantized kernel does not compute on
// (those are dequantized at load instead). Block bytes are per 64-output panel.
constexpr std::optional<QuantPanelFormat> quant_panel_format(quant::GgmlType type) {
  using quant::GgmlType;
  constexpr int64_t kPanel = 64;  // PackedMatrix::kPanelWidth (kept free of that header)
  switch (type) {
    case GgmlType::kQ8_0:
      return QuantPanelFormat{type, 32, 32, 34 * kPanel, 8, 0, false};
    case GgmlType::kQ4_0:
      return QuantPanelFormat{type, 32, 32, 18 * kPanel, 4, 8, false};
    case GgmlType::kQ4_1:
      return QuantPanelFormat{type, 32, 32, 20 * kPanel, 4, 0, true};
    case GgmlType::kQ5_0:
      return QuantPanelFormat{type, 32, 32, 34 * kPanel, 8, 16, false};
    case GgmlType::kQ5_1:
      return QuantPanelFormat{type, 32, 32, 36 * kPanel, 8, 0, true};
    case GgmlType::kQ4_K:
      return QuantPanelFormat{type, 256, 32, 148 * kPanel, 4, 0, true};
    case GgmlType::kQ5_K:
      return QuantPanelFormat{type, 256, 32, 180 * kPanel, 5, 0, true};
    case GgmlType::kQ6_K:
      return QuantPanelFormat{type, 256, 16, 210 * kPanel, 6, 32, false};
    default:
      return std::nullopt;
  }
}

// Where the quants of a block sit: column by column (the f32 kernel) or in column quads (the
// int8 kernel).
enum class QuantArrangement { kColumns, kQuads };

// Byte offsets of the fields inside one block of a 64-output panel.
struct QuantBlockLayout {
  int64_t d = 0;         // f16[64]
  int64_t m = -1;        // f16[64]: Q4_1 / Q5_1's min; K-quants' dmin
  int64_t scales = -1;   // u8[groups][64] (Q6_K: i8)
  int64_t mins = -1;     // u8[groups][64] (K-quants with an offset)
  int64_t nibbles = -1;  // u8[block_cols / 2][64] (Q5_K, Q6_K: packed fields or carriers from
                         // here through `high`)
  int64_t bytes8 = -1;   // u8[block_cols][64] (8-bit quants, Q5_0 / Q5_1)
  int64_t high = -1;     // u8[block_cols / 8][64] (Q5_K) or [block_cols / 4][64] (Q6_K)
  int64_t size = 0;
};
constexpr QuantBlockLayout quant_block_layout(const QuantPanelFormat& f) {
  constexpr int64_t kPanel = 64;
  QuantBlockLayout l;
  int64_t at = 2 * kPanel;  // d
  const int64_t groups = f.block_cols / f.group_cols;
  const bool k_quant = f.block_cols == 256;
  if (f.has_offset) {  // Q4_1 / Q5_1's m, the K-quants' dmin
    l.m = at;
    at += 2 * kPanel;
  }
  if (k_quant) {
    l.scales = at;
    at += groups * kPanel;
    if (f.has_offset) {
      l.mins = at;
      at += groups * kPanel;
    }
  }
  if (f.quant_bits == 8) {
    l.bytes8 = at;
    at += f.block_cols * kPanel;
  } else {
    l.nibbles = at;
    at += f.block_cols / 2 * kPanel;
    if (f.quant_bits > 4) {
      l.high = at;
      at += f.block_cols / (f.quant_bits == 5 ? 8 : 4) * kPanel;
    }
  }
  l.size = at;
  return l;
}

// Writes source row `row_blocks` (cols / block_cols GGML blocks of `format.type`, as stored in a
// GGUF file) into slot `slot` of a panel whose blocks start at `panel`. The panel must be zeroed
// beforehand; slots never written stay zero (their outputs compute to 0).
void pack_quant_row(const QuantPanelFormat& format, const uint8_t* row_blocks, int64_t cols,
                    uint8_t* panel, int64_t slot,
                    QuantArrangement arrangement = QuantArrangement::kColumns);

// Row `row_blocks` as the quantized kernel computes with it: each column's quant as f32 (offset
// applied: Q4_0 q − 8, Q6_K q − 32), each group's scale and offset (0 for types without one), in
// f32, rounded as ggml rounds them. For tests and reference paths.
void quant_row_terms(const QuantPanelFormat& format, const uint8_t* row_blocks, int64_t cols,
                     float* q, float* scale, float* offset);

}  // namespace rlt::kernels
