// The int8 kernel's panel routines (linear_quant_int8.cpp), written once against a lanes struct
// `L` (int8_lanes-inl.h) that the including namespace names. linear_quant_int8.cpp includes this
// file once per lanes struct a target can run: on AArch64 twice, NEON with and without the
// dot-product extension, the second inside that extension's target pragma (a template over L
// could not be: GCC compiles an instantiation with the options where the template is defined, and
// refuses to inline the extension's intrinsics into it). Hence no include guard.

using I = L::I;
using F = L::F;
constexpr int kVectors = kPanel / L::kLanes;
constexpr int64_t kVectorBytes = 4 * L::kLanes;  // a quad's bytes for one vector of outputs

template <GgmlType T>
struct Int8Traits {
  static constexpr QuantPanelFormat kFormat = *quant_panel_format(T);
  static constexpr QuantBlockLayout kLayout = quant_block_layout(kFormat);
  // Signed Q8_0 weights: as they are where the lanes multiply signed bytes (sdot); where quad
  // sums are int32 (VNNI) w + 128 (the sign bit flipped, once per weight vector) times x, less
  // 128 · Σ x per row and group in the epilogue — one product per row where |w| times x carrying
  // w's sign takes two. Elsewhere (int16 pair sums, which 255 · 127 · 2 would overflow) the sign
  // form.
  static constexpr bool kBiasedSigned =
      T == GgmlType::kQ8_0 && L::kInt32Quads && !L::kSignedWeights;
  // What the stored (or biased) unsigned quant exceeds the true one by.
  static constexpr int kOffset = kFormat.q_offset + (kBiasedSigned ? 128 : 0);
};

// The block-wide factors of the kLanes outputs from slot s0: d, and dmin where the type has one.
struct BlockFactors {
  F d, dmin;
};
template <GgmlType T>
HWY_INLINE BlockFactors LoadBlockFactors(const uint8_t* blk, int64_t s0) {
  constexpr QuantBlockLayout l = Int8Traits<T>::kLayout;
  BlockFactors f;
  f.d = L::HalvesToF(blk + l.d + 2 * s0);
  f.dmin = Int8Traits<T>::kFormat.has_offset ? L::HalvesToF(blk + l.m + 2 * s0) : L::ZeroF();
  return f;
}

// Group g's scale and offset for the kLanes outputs from slot s0, rounded as the f32 kernel's
// (and ggml's dequantization: d · sc once, the offset −(dmin · m) likewise).
template <GgmlType T>
HWY_INLINE void Scales(const uint8_t* blk, const BlockFactors& f, int64_t g, int64_t s0, F& s,
                       F& o) {
  using Tr = Int8Traits<T>;
  constexpr QuantBlockLayout l = Tr::kLayout;
  if constexpr (Tr::kFormat.block_cols == 32) {
    s = f.d;
    o = f.dmin;
  } else if constexpr (T == GgmlType::kQ6_K) {
    s = L::Mul(f.d, L::S8ToF(blk + l.scales + g * kPanel + s0));
  } else {
    s = L::Mul(f.d, L::U8ToF(blk + l.scales + g * kPanel + s0));
    o = L::Neg(L::Mul(f.dmin, L::U8ToF(blk + l.mins + g * kPanel + s0)));
  }
}

// Σ q · qx over group g of block `blk` (columns col0.. of the activations) for kR rows and the kV
// vectors of outputs from vector v0, added to acc in int32 (exact: the int16 bounds below hold
// for the vpmaddubsw lanes; VNNI sums in int32 throughout).
template <GgmlType T, int kR, int kV>
HWY_INLINE void GroupDots(const uint8_t* HWY_RESTRICT blk, int64_t g, int v0,
                          const int8_t* const (&xq)[kR], int64_t col0, I (&acc)[kR][kV],
                          const Ahead& ahead = {}) {
  using Tr = Int8Traits<T>;
  constexpr QuantPanelFormat f = Tr::kFormat;
  constexpr QuantBlockLayout l = Tr::kLayout;
  const int64_t gc = g * f.group_cols;  // the group's first column inside the block
  // Loops run vector-outer, row-inner: a weight vector is decoded once and used by every row
  // while the accumulators, not the decoded weights, take the registers.
  if constexpr (f.quant_bits == 8) {
    // One quad at a time: a Q8_0 pair sum reaches 2 · 128 · 127, so each goes to int32 at once.
    for (int64_t j = gc / 4; j < (gc + f.group_cols) / 4; ++j) {
      PrefetchPart<f.group_cols / 4>(ahead, static_cast<int>(j - gc / 4));
      for (int v = 0; v < kV; ++v) {
        const I w = L::Load(blk + l.bytes8 + j * kQuadBytes + (v0 + v) * kVectorBytes);
        // Signed Q8_0 weights: as they are, biased, or |w| times x carrying w's sign
        // (Int8Traits); Q5_0 / Q5_1 are unsigned.
        constexpr bool kSignForm = T == GgmlType::kQ8_0 && !Tr::kBiasedSigned && !L::kSignedWeights;
        const I aw = Tr::kBiasedSigned ? L::Xor(w, L::Bytes(0x80))
                     : kSignForm       ? L::Magnitude(w)
                                       : w;
        for (int r = 0; r < kR; ++r) {
          const I xb = L::Broadcast4(xq[r] + col0 + 4 * j);
          const I xs = kSignForm ? L::WithSignOf(xb, w) : xb;
          acc[r][v] = L::MulAddWiden(acc[r][v], aw, xs);
        }
      }
    }
  } else if constexpr (f.quant_bits == 4) {
    // 4-bit quants: a pair sum is at most 2 · 15 · 127, so the group's 8 products per lane add up
    // in int16 (≤ 30480) and widen once.
    const I low4 = L::Bytes(0x0F);
    I s16[kR][kV];
    for (int r = 0; r < kR; ++r)
      for (int v = 0; v < kV; ++v) s16[r][v] = L::Zero();
    for (int64_t j = gc / 8; j < (gc + f.group_cols) / 8; ++j) {
      PrefetchPart<f.group_cols / 8>(ahead, static_cast<int>(j - gc / 8));
      for (int v = 0; v < kV; ++v) {
        const I raw = L::Load(blk + l.nibbles + j * kQuadBytes + (v0 + v) * kVectorBytes);
        const I lo = L::And(raw, low4);
        const I hi = L::And(L::Shr16<4>(raw), low4);
        for (int r = 0; r < kR; ++r) {
          s16[r][v] = L::MulAdd(s16[r][v], lo, L::Broadcast4(xq[r] + col0 + 8 * j));
          s16[r][v] = L::MulAdd(s16[r][v], hi, L::Broadcast4(xq[r] + col0 + 8 * j + 4));
        }
      }
    }
    for (int r = 0; r < kR; ++r)
      for (int v = 0; v < kV; ++v) acc[r][v] = L::Widen(acc[r][v], s16[r][v]);
  } else if constexpr (f.quant_bits == 5) {
    // Q5_K: five carrier quads per group (quant_panels.h). A pair sum reaches 2 · 31 · 127, so
    // four quads (two products per lane each) add up in int16 (≤ 31496) before each widening.
    // Right shifts are 16-bit: a byte masked to bits ≥ the shift count keeps its bits.
    const I low5 = L::Bytes(0x1F), top3 = L::Bytes(0xE0), mid2 = L::Bytes(0x60),
            bit7 = L::Bytes(0x80);
    for (int v = 0; v < kV; ++v) {
      PrefetchPart<kV>(ahead, v);
      const uint8_t* base = blk + l.nibbles + 5 * g * kQuadBytes + (v0 + v) * kVectorBytes;
      I c[5];
      for (int i = 0; i < 5; ++i) c[i] = L::Load(base + i * kQuadBytes);
      const I q5 = L::Or(L::Shr16<5>(L::And(c[0], top3)), L::Shr16<2>(L::And(c[3], mid2)));
      const I q6 = L::Or(L::Shr16<5>(L::And(c[1], top3)), L::Shr16<2>(L::And(c[4], mid2)));
      const I q7 = L::Or(L::Shr16<5>(L::And(c[2], top3)),
                         L::Shr16<3>(L::Or(L::And(c[4], bit7), L::Shr16<1>(L::And(c[3], bit7)))));
      // Quads 0-3 then 4-7, each half's partial widened once.
      auto half_sum = [&](I a, const int8_t* xh, I qa, I qb, I qc, I qd) {
        I p = L::MulAdd(L::Zero(), qa, L::Broadcast4(xh));
        p = L::MulAdd(p, qb, L::Broadcast4(xh + 4));
        p = L::MulAdd(p, qc, L::Broadcast4(xh + 8));
        p = L::MulAdd(p, qd, L::Broadcast4(xh + 12));
        return L::Widen(a, p);
      };
      for (int r = 0; r < kR; ++r) {
        const int8_t* xr = xq[r] + col0 + gc;
        acc[r][v] = half_sum(acc[r][v], xr, L::And(c[0], low5), L::And(c[1], low5),
                             L::And(c[2], low5), L::And(c[3], low5));
        acc[r][v] = half_sum(acc[r][v], xr + 16, L::And(c[4], low5), q5, q6, q7);
      }
    }
  } else {
    static_assert(T == GgmlType::kQ6_K);
    // Q6_K: a group is 16 columns, three carrier quads (quant_panels.h). A pair sum reaches
    // 2 · 63 · 127, so two add up in int16 (≤ 32004).
    const I low6 = L::Bytes(0x3F), top2 = L::Bytes(0xC0);
    for (int v = 0; v < kV; ++v) {
      PrefetchPart<kV>(ahead, v);
      const uint8_t* base = blk + l.nibbles + 3 * g * kQuadBytes + (v0 + v) * kVectorBytes;
      const I c0 = L::Load(base), c1 = L::Load(base + kQuadBytes),
              c2 = L::Load(base + 2 * kQuadBytes);
      const I q0 = L::And(c0, low6), q1 = L::And(c1, low6), q2 = L::And(c2, low6);
      // Quad 3: each carrier's top two bits, shifted down to bits 0-1, 2-3 and 4-5.
      const I q3 = L::Or(L::Shr16<6>(L::And(c0, top2)),
                         L::Or(L::Shr16<4>(L::And(c1, top2)), L::Shr16<2>(L::And(c2, top2))));
      for (int r = 0; r < kR; ++r) {
        const int8_t* xr = xq[r] + col0 + gc;
        const I p01 =
            L::MulAdd(L::MulAdd(L::Zero(), q0, L::Broadcast4(xr)), q1, L::Broadcast4(xr + 4));
        const I p23 =
            L::MulAdd(L::MulAdd(L::Zero(), q2, L::Broadcast4(xr + 8)), q3, L::Broadcast4(xr + 12));
        acc[r][v] = L::Widen(L::Widen(acc[r][v], p01), p23);
      }
    }
  }
}

// The float steps of one group for kR rows and the kLanes outputs of vector v: y = fma(scale ·
// d(g), isum, y), then y = fma(offset, d(g) · Σ qx, y), y[r] holding row r's sums. Every tile
// shape and target runs exactly these, lane for lane.
template <GgmlType T, int kR>
HWY_INLINE void GroupEpilogue(const QuantizedActivations& a, int64_t r0, const uint8_t* blk,
                              const BlockFactors& bf, int64_t g, int64_t col, int v,
                              const I (&isums)[kR], F (&y)[kR]) {
  using Tr = Int8Traits<T>;
  constexpr QuantPanelFormat f = Tr::kFormat;
  const int64_t groups32 = a.cols / 32, groups16 = a.cols / 16;
  F s, o = L::ZeroF();
  Scales<T>(blk, bf, g, v * L::kLanes, s, o);
  for (int r = 0; r < kR; ++r) {
    const int64_t row = r0 + r;
    I isum = isums[r];
    if constexpr (Tr::kOffset != 0) {  // Σ (q − off) · qx = Σ q · qx − off · Σ qx
      int32_t sx = a.sum16[row * groups16 + col / 16];
      if (f.group_cols == 32) sx += a.sum16[row * groups16 + col / 16 + 1];
      isum = L::Sub32(isum, L::Set32(Tr::kOffset * sx));
    }
    const F factor = L::Mul(s, L::SetF(a.d[row * groups32 + col / 32]));
    y[r] = L::Fma(factor, L::ToF(isum), y[r]);
    if constexpr (f.has_offset) y[r] = L::Fma(o, L::SetF(a.dsum[row * groups32 + col / 32]), y[r]);
  }
}

// kR input rows from r0 against vectors v0..v0 + kV of one panel over blocks b0..b1, in the fixed
// order of linear_quant_int8.h; the sums stay in registers through the blocks, start from out (a
// later stretch of the same rows) when `resume`, and are stored to out[r][slot] at the end (row
// stride kPanel). With kAheadBytes > 0 each group prefetches its share of the panel that many
// bytes on (its `share` of it), spread over the group's steps.
template <GgmlType T, int kR, int kV, int64_t kAheadBytes = 0>
HWY_INLINE void Int8Tile(const QuantizedActivations& a, int64_t r0,
                         const uint8_t* HWY_RESTRICT panel, int v0, int64_t b0, int64_t b1,
                         bool resume, PrefetchShare share, float* HWY_RESTRICT out) {
  constexpr QuantPanelFormat f = Int8Traits<T>::kFormat;
  constexpr int64_t kGroups = f.block_cols / f.group_cols;
  constexpr int64_t kShare = f.block_bytes / kGroups;
  const int64_t k = a.cols;
  const int64_t part_bytes = (kShare + share.parts - 1) / share.parts,
                part_at = kAheadBytes + share.part * part_bytes;
  const int8_t* xq[kR];
  for (int r = 0; r < kR; ++r) xq[r] = a.q.data() + (r0 + r) * k;
  F y[kV][kR];
  for (int v = 0; v < kV; ++v)
    for (int r = 0; r < kR; ++r)
      y[v][r] = resume ? L::LoadF(out + r * kPanel + (v0 + v) * L::kLanes) : L::ZeroF();
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = panel + b * f.block_bytes;
    const int64_t col0 = b * f.block_cols;
    for (int64_t g = 0; g < kGroups; ++g) {
      // A compile-time choice: a run-time test per step cost prefill's tiles 25 %.
      const Ahead ahead =
          kAheadBytes == 0
              ? Ahead{}
              : Ahead{reinterpret_cast<const char*>(blk) + part_at + g * kShare, part_bytes};
      I acc[kR][kV];
      for (int r = 0; r < kR; ++r)
        for (int v = 0; v < kV; ++v) acc[r][v] = L::Zero();
      GroupDots<T, kR, kV>(blk, g, v0, xq, col0, acc, ahead);
      for (int v = 0; v < kV; ++v) {
        I isums[kR];
        for (int r = 0; r < kR; ++r) isums[r] = acc[r][v];
        // Loaded per group rather than held per block: held, they would take the registers the
        // accumulators need (an L1 load and a conversion against a group's dot products).
        const BlockFactors bf = LoadBlockFactors<T>(blk, (v0 + v) * L::kLanes);
        GroupEpilogue<T, kR>(a, r0, blk, bf, g, col0 + g * f.group_cols, v0 + v, isums, y[v]);
      }
    }
  }
  for (int v = 0; v < kV; ++v)
    for (int r = 0; r < kR; ++r) L::StoreF(out + r * kPanel + (v0 + v) * L::kLanes, y[v][r]);
}

constexpr int kTileVectors = L::kTileVectors;

// Rows m0 .. m0 + kRows of a panel as one tile, slice by slice, without prefetching (prefill).
template <GgmlType T, int kRows>
HWY_INLINE void Int8Rows(const QuantizedActivations& a, int64_t m0, const PackedMatrix& w,
                         int64_t p, const uint8_t* panel, float* y) {
  alignas(64) float out[kRows][kPanel];
  const int64_t blocks = a.cols / Int8Traits<T>::kFormat.block_cols;
  for (int v0 = 0; v0 < kVectors; v0 += kTileVectors)
    Int8Tile<T, kRows, kTileVectors>(a, m0, panel, v0, 0, blocks, false, {}, &out[0][0]);
  store_panel(w, p, &out[0][0], kRows, m0, y);
}

// Rows r0 .. r0 + rows (2 .. kFewRows - 1) of a panel: tiles of 4 rows and the rest as 2 or 3
// (a remainder of one as 2 + 3), stretch by stretch of columns, each stretch passing through
// every tile's slices while each pass prefetches its part of the panel ahead. The panel thus
// streams from memory once, under all of the arithmetic (run tile after tile and slice after
// slice over the whole panel, only the first pass had memory in flight). Each output's sums take
// the same steps as one row's: y goes to memory and back.
template <GgmlType T>
HWY_INLINE void Int8FewRows(const QuantizedActivations& a, int64_t r0, int64_t rows,
                            const PackedMatrix& w, int64_t p, const uint8_t* panel, float* y) {
  constexpr QuantPanelFormat f = Int8Traits<T>::kFormat;
  constexpr int64_t kStretchBlocks = std::max<int64_t>(1, kStretchCols / f.block_cols);
  alignas(64) float out[kFewRows][kPanel];
  int tiles[kFewRows / 2], count = 0;
  const int n = static_cast<int>(rows);
  for (int left = n; left > 0;) {
    const int take = left == 5 ? 2 : std::min(left, kTileRows);
    tiles[count++] = take;
    left -= take;
  }
  const int passes = count * (kVectors / kTileVectors);
  const int64_t blocks = a.cols / f.block_cols;
  if (blocks == 0) std::fill_n(&out[0][0], n * kPanel, 0.0f);  // no columns: zeros, as one row's
  for (int64_t b0 = 0; b0 < blocks; b0 += kStretchBlocks) {
    const int64_t b1 = std::min(blocks, b0 + kStretchBlocks);
    int pass = 0;
    for (int t = 0, start = 0; t < count; start += tiles[t], ++t)
      for (int v0 = 0; v0 < kVectors; v0 += kTileVectors) {
        const PrefetchShare share{pass++, passes};
        WithRowCount<2, kTileRows>(tiles[t], [&](auto tile_rows) HWY_ATTR {
          Int8Tile<T, tile_rows.value, kTileVectors, kFewRowsAhead>(
              a, r0 + start, panel, v0, b0, b1, b0 > 0, share, &out[start][0]);
        });
      }
  }
  store_panel(w, p, &out[0][0], n, r0, y);
}

template <GgmlType T>
void Int8Panel(const QuantizedActivations& a, int64_t r0, int64_t rows, const PackedMatrix& w,
               int64_t p, const uint8_t* panel, float* y) {
  if (rows == 1) {
    alignas(64) float out[1][kPanel];
    Int8Tile<T, 1, kVectors, kDecodeAhead>(
        a, r0, panel, 0, 0, a.cols / Int8Traits<T>::kFormat.block_cols, false, {}, &out[0][0]);
    store_panel(w, p, &out[0][0], 1, r0, y);
    return;
  }
  if (rows < kFewRows) return Int8FewRows<T>(a, r0, rows, w, p, panel, y);
  int64_t m0 = 0;
  for (; m0 + kTileRows <= rows; m0 += kTileRows)
    Int8Rows<T, kTileRows>(a, r0 + m0, w, p, panel, y);
  // The 0-3 rows left over as one tile.
  WithRowCount<1, kTileRows - 1>(rows - m0, [&](auto tile_rows) HWY_ATTR {
    Int8Rows<T, tile_rows.value>(a, r0 + m0, w, p, panel, y);
  });
}

// The panel routine of a block type; null for types packing never lays out for this kernel.
Int8PanelFn int8_panel_fn(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return &Int8Panel<GgmlType::kQ8_0>;
    case GgmlType::kQ4_0:
      return &Int8Panel<GgmlType::kQ4_0>;
    case GgmlType::kQ4_1:
      return &Int8Panel<GgmlType::kQ4_1>;
    case GgmlType::kQ5_0:
      return &Int8Panel<GgmlType::kQ5_0>;
    case GgmlType::kQ5_1:
      return &Int8Panel<GgmlType::kQ5_1>;
    case GgmlType::kQ4_K:
      return &Int8Panel<GgmlType::kQ4_K>;
    case GgmlType::kQ5_K:
      return &Int8Panel<GgmlType::kQ5_K>;
    case GgmlType::kQ6_K:
      return &Int8Panel<GgmlType::kQ6_K>;
    default:
      return nullptr;
  }
}
