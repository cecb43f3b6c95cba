#include "kernels/cpu/packed_matrix.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "common/page_buffer.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "kernels/cpu/quant_panels.h"

namespace rlt::kernels {
namespace {

struct RowRef {
  const WeightMatrix* matrix = nullptr;  // null: a zero padding row
  int64_t row = 0;

  // Whether the row is stored as `dtype` elements (padding is), so it can be copied as it is.
  bool stored_as(DType dtype) const {
    return matrix == nullptr || (!matrix->quantized() && matrix->dtype == dtype);
  }
  // The row's first element (null for padding); rows of a panel share `cols`.
  template <typename T>
  const T* start(int64_t cols) const {
    return matrix == nullptr ? nullptr : static_cast<const T*>(matrix->data) + row * cols;
  }
};

// Writes columns first, first + step, ... of row r of w (step 1 or 2) into one slot of a panel:
// the j-th of them goes to dst + j * stride (elements), in the packed dtype. With step 2 and
// first 0 or 1, dst is offset by `first` too (the two halves of a column pair).
template <typename T>
void scatter_row(const WeightMatrix& w, int64_t r, T* dst, int64_t stride, int first = -1) {
  const int64_t step = first < 0 ? 1 : 2;
  const int64_t begin = first < 0 ? 0 : first;
  if (first > 0) dst += first;
  if constexpr (sizeof(T) == 2) {
    for (int64_t c = begin, j = 0; c < w.cols; c += step, ++j)
      std::memcpy(dst + j * stride, static_cast<const uint16_t*>(w.data) + r * w.cols + c, 2);
  } else if (w.dtype == DType::kF32 && !w.quantized()) {
    for (int64_t c = begin, j = 0; c < w.cols; c += step, ++j)
      dst[j * stride] = static_cast<const float*>(w.data)[r * w.cols + c];
  } else {  // mixed or quantized parts: widened to f32
    std::vector<float> row(static_cast<size_t>(w.cols));
    w.row_to_f32(r, row.data());
    for (int64_t c = begin, j = 0; c < w.cols; c += step, ++j) dst[j * stride] = row[c];
  }
}

// One kPanels panel whose source rows are all stored in the packed dtype: copied in blocks of
// columns, so that a block's destination (kBlock columns × the panel's 64 outputs) stays in L1
// while the 64 source rows stream through it, instead of each row's scatter sweeping the whole
// panel. False (nothing written) when a row needs widening.
template <typename SourceRow>
bool copy_panel_blocked(DType dtype, int64_t panel, int64_t cols, void* raw, int64_t offset,
                        const SourceRow& source) {
  constexpr int64_t kWidth = PackedMatrix::kPanelWidth, kBlock = 128;
  RowRef rows[kWidth];
  for (int64_t slot = 0; slot < kWidth; ++slot) {
    rows[slot] = source(panel * kWidth + slot);
    if (!rows[slot].stored_as(dtype)) return false;
  }
  auto copy = [&](auto* dst) {
    using T = std::remove_pointer_t<decltype(dst)>;
    if constexpr (sizeof(T) == 2) {
      const uint16_t* src[kWidth];
      for (int64_t slot = 0; slot < kWidth; ++slot) src[slot] = rows[slot].start<uint16_t>(cols);
      transpose_panel_u16(src, cols, 0, cols, reinterpret_cast<uint16_t*>(dst));
      return;
    }
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t c1 = std::min(cols, c0 + kBlock);
      for (int64_t slot = 0; slot < kWidth; ++slot) {
        const T* src = rows[slot].start<T>(cols);
        if (src == nullptr) continue;
        for (int64_t c = c0; c < c1; ++c) dst[c * kWidth + slot] = src[c];
      }
    }
  };
  if (dtype == DType::kF32) {
    copy(static_cast<float*>(raw) + offset);
  } else {
    copy(static_cast<uint16_t*>(raw) + offset);
  }
  return true;
}

DType common_dtype(const std::vector<WeightMatrix>& parts) {
  for (const auto& p : parts)
    if (p.quantized() || p.dtype != parts.front().dtype) return DType::kF32;
  return parts.front().dtype;
}

bool any_quantized(const std::vector<WeightMatrix>& parts) {
  for (const auto& p : parts)
    if (p.quantized()) return true;
  return false;
}

// Whether the parts can stay quantized: every part in a type the quantized kernel computes on,
// and panels never mixing two types (each part but the last whole panels, when types differ).
bool quant_packable(const std::vector<WeightMatrix>& parts, bool concatenated) {
  for (const auto& p : parts) {
    const std::optional<QuantPanelFormat> format =
        p.quantized() ? quant_panel_format(*p.quant) : std::nullopt;
    // Rows of whole blocks only (every loader checks; a panel cut short would be read past).
    if (!format || p.cols % format->block_cols != 0) return false;
  }
  bool same = true;
  for (const auto& p : parts) same &= *p.quant == *parts.front().quant;
  if (same) return true;
  if (!concatenated) return false;
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if (parts[i].rows % PackedMatrix::kPanelWidth != 0) return false;
  return true;
}

// Whether quantized parts go to the int8-activation kernel (it computes on every panel format).
bool int8_layout(const PackOptions& options) {
  return options.int8_activations && linear_quant_int8_supported();
}

}  // namespace

#if defined(__SSE2__)
// 8 × 8 transposes in registers: eight 16-byte loads and stores where the element loop makes 64
// of each. Packing a model is most of a first start's time, and this loop most of packing; for
// a matrix whose packing is deferred it runs on every pass, block by block.
void transpose_panel_u16(const uint16_t* const* src, int64_t cols, int64_t begin, int64_t end,
                         uint16_t* dst) {
  constexpr int64_t kWidth = PackedMatrix::kPanelWidth;
  constexpr int64_t kBlock = 128, kPrefetchAhead = 2 * kBlock;
  const int64_t whole = begin + (end - begin) / 8 * 8;
  // Blocks of columns, so that a block's destination (128 columns × 64 outputs, 16 KiB) and its
  // sources stay in L1 while the eight groups of rows pass through it.
  for (int64_t c0 = begin; c0 < whole; c0 += kBlock) {
    const int64_t c1 = std::min(whole, c0 + kBlock);
    // 64 rows are 64 streams, more than the hardware prefetcher follows (a deferred matrix's
    // pass reads them straight from the checkpoint): each row's block after next is asked for
    // while this one is transposed.
    if (c0 + kPrefetchAhead < cols) {
      for (int64_t slot = 0; slot < kWidth; ++slot) {
        if (src[slot] == nullptr) continue;
        const char* line = reinterpret_cast<const char*>(src[slot] + c0 + kPrefetchAhead);
        for (int64_t b = 0; b < kBlock * 2; b += 64) _mm_prefetch(line + b, _MM_HINT_T0);
      }
    }
    for (int64_t group = 0; group < kWidth; group += 8) {
      const uint16_t* const* g = src + group;
      for (int64_t c = c0; c < c1; c += 8) {
        __m128i v[8];
        for (int i = 0; i < 8; ++i)
          v[i] = g[i] == nullptr ? _mm_setzero_si128()
                                 : _mm_loadu_si128(reinterpret_cast<const __m128i*>(g[i] + c));
        const __m128i a0 = _mm_unpacklo_epi16(v[0], v[1]), a1 = _mm_unpackhi_epi16(v[0], v[1]);
        const __m128i a2 = _mm_unpacklo_epi16(v[2], v[3]), a3 = _mm_unpackhi_epi16(v[2], v[3]);
        const __m128i a4 = _mm_unpacklo_epi16(v[4], v[5]), a5 = _mm_unpackhi_epi16(v[4], v[5]);
        const __m128i a6 = _mm_unpacklo_epi16(v[6], v[7]), a7 = _mm_unpackhi_epi16(v[6], v[7]);
        const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
        const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
        const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
        const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
        const __m128i out[8] = {_mm_unpacklo_epi64(b0, b4), _mm_unpackhi_epi64(b0, b4),
                                _mm_unpacklo_epi64(b1, b5), _mm_unpackhi_epi64(b1, b5),
                                _mm_unpacklo_epi64(b2, b6), _mm_unpackhi_epi64(b2, b6),
                                _mm_unpacklo_epi64(b3, b7), _mm_unpackhi_epi64(b3, b7)};
        for (int k = 0; k < 8; ++k)
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (c - begin + k) * kWidth + group),
                           out[k]);
      }
    }
  }
  for (int64_t c = whole; c < end; ++c)
    for (int64_t slot = 0; slot < kWidth; ++slot)
      dst[(c - begin) * kWidth + slot] = src[slot] == nullptr ? 0 : src[slot][c];
}
#else
void transpose_panel_u16(const uint16_t* const* src, int64_t, int64_t begin, int64_t end,
                         uint16_t* dst) {
  constexpr int64_t kWidth = PackedMatrix::kPanelWidth;
  for (int64_t c = begin; c < end; ++c)
    for (int64_t slot = 0; slot < kWidth; ++slot)
      dst[(c - begin) * kWidth + slot] = src[slot] == nullptr ? 0 : src[slot][c];
}
#endif

// Zero-filled (the padding outputs must read as zeros).
static std::shared_ptr<void> allocate_panels(int64_t bytes) {
  std::shared_ptr<void> p = allocate_zeroed(static_cast<size_t>(bytes));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

struct PackedMatrix::Deferred {
  std::vector<const uint16_t*> rows;  // one per packed row, null for padding
  std::atomic<const void*> packed{nullptr};
  std::shared_ptr<void> buffer;  // written before `packed` is published
};

const void* PackedMatrix::data() const {
  return deferred_ ? deferred_->packed.load(std::memory_order_acquire) : data_.get();
}

const uint16_t* const* PackedMatrix::pending_rows() const {
  if (!deferred_ || deferred_->packed.load(std::memory_order_acquire) != nullptr) return nullptr;
  return deferred_->rows.data();
}

void PackedMatrix::complete_packing() const {
  if (pending_rows() == nullptr) return;
  std::shared_ptr<void> buffer = allocate_panels(bytes());
  auto* dst = static_cast<uint16_t*>(buffer.get());
  const int64_t panel_elems = kPanelWidth * desc_.cols;
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < desc_.panels; ++panel)
    transpose_panel_u16(deferred_->rows.data() + panel * kPanelWidth, desc_.cols, 0, desc_.cols,
                        dst + panel * panel_elems);
  deferred_->buffer = std::move(buffer);
  deferred_->packed.store(deferred_->buffer.get(), std::memory_order_release);
}

template <typename SourceRow>
PackedMatrix PackedMatrix::build(DType dtype, Epilogue epilogue, Options options, int64_t outputs,
                                 int64_t packed_rows, int64_t cols, SourceRow source) {
  PackedMatrix p;
  p.desc_.dtype = dtype;
  p.desc_.epilogue = epilogue;
  p.desc_.outputs = outputs;
  p.desc_.cols = cols;
  p.desc_.panels = (packed_rows + kPanelWidth - 1) / kPanelWidth;
  if (options.bf16_activations && dtype == DType::kBF16 && bf16_dot_supported())
    p.desc_.layout = Layout::kBf16Pairs;
  if (p.bytes() == 0) return p;
  if (options.rows_in_place && p.desc_.layout == Layout::kPanels && dtype_size(dtype) == 2) {
    auto deferred = std::make_shared<Deferred>();
    deferred->rows.assign(static_cast<size_t>(p.desc_.panels * kPanelWidth), nullptr);
    bool as_stored = true;
    for (int64_t r = 0; r < packed_rows && as_stored; ++r) {
      const RowRef src = source(r);
      as_stored = src.stored_as(dtype);
      deferred->rows[static_cast<size_t>(r)] = src.start<uint16_t>(cols);
    }
    if (as_stored) {
      p.deferred_ = std::move(deferred);
      return p;
    }
  }
  std::shared_ptr<void> buffer = allocate_panels(p.bytes());
  void* raw = buffer.get();
  p.data_ = std::move(buffer);
  const int64_t stored_cols = p.stored_cols();
  // Packing a 1.4B model moves gigabytes; panels are independent.
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < p.desc_.panels; ++panel) {
    const int64_t offset = panel * kPanelWidth * stored_cols;
    if (p.desc_.layout == Layout::kPanels &&
        copy_panel_blocked(dtype, panel, cols, raw, offset, source))
      continue;
    for (int64_t slot = 0; slot < kPanelWidth; ++slot) {
      const RowRef src = source(panel * kPanelWidth + slot);
      if (src.matrix == nullptr) continue;
      if (p.desc_.layout == Layout::kBf16Pairs) {
        // Column c of this output goes to pair c / 2, position c % 2.
        auto* dst = static_cast<uint16_t*>(raw) + offset + slot * 2;
        for (int parity : {0, 1}) scatter_row(*src.matrix, src.row, dst, 2 * kPanelWidth, parity);
      } else if (dtype == DType::kF32) {
        scatter_row(*src.matrix, src.row, static_cast<float*>(raw) + offset + slot, kPanelWidth);
      } else {
        scatter_row(*src.matrix, src.row, static_cast<uint16_t*>(raw) + offset + slot, kPanelWidth);
      }
    }
  }
  return p;
}

template <typename SourceRow>
PackedMatrix PackedMatrix::build_quant(Epilogue epilogue, bool int8, int64_t outputs,
                                       int64_t packed_rows, int64_t cols, SourceRow source) {
  PackedMatrix p;
  p.desc_.dtype = DType::kU8;
  p.desc_.epilogue = epilogue;
  p.desc_.layout = int8 ? Layout::kQuantInt8 : Layout::kQuant;
  const QuantArrangement arrangement = int8 ? QuantArrangement::kQuads : QuantArrangement::kColumns;
  p.desc_.outputs = outputs;
  p.desc_.cols = cols;
  p.desc_.panels = (packed_rows + kPanelWidth - 1) / kPanelWidth;
  // Each panel takes the type of its rows (quant_packable guarantees one type per panel).
  int64_t offset = 0;
  for (int64_t panel = 0; panel < p.desc_.panels; ++panel) {
    std::optional<quant::GgmlType> type;
    for (int64_t slot = 0; slot < kPanelWidth && !type; ++slot)
      if (const RowRef src = source(panel * kPanelWidth + slot); src.matrix)
        type = src.matrix->quant;
    const QuantPanelFormat format = *quant_panel_format(*type);
    p.desc_.quant_panels.push_back({*type, offset});
    offset += cols / format.block_cols * format.block_bytes;
  }
  p.desc_.quant_bytes = offset;
  if (offset == 0) return p;
  std::shared_ptr<void> buffer = allocate_panels(offset);
  void* raw = buffer.get();
  p.data_ = std::move(buffer);
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < p.desc_.panels; ++panel) {
    const QuantPanel& qp = p.desc_.quant_panels[static_cast<size_t>(panel)];
    const QuantPanelFormat format = *quant_panel_format(qp.type);
    for (int64_t slot = 0; slot < kPanelWidth; ++slot) {
      const RowRef src = source(panel * kPanelWidth + slot);
      if (src.matrix == nullptr) continue;
      const auto* row =
          static_cast<const uint8_t*>(src.matrix->data) + src.row * src.matrix->row_bytes();
      pack_quant_row(format, row, cols, static_cast<uint8_t*>(raw) + qp.offset, slot, arrangement);
    }
  }
  return p;
}

Result<PackedMatrix> PackedMatrix::from_bytes(const Descriptor& d,
                                              std::shared_ptr<const void> bytes, int64_t size) {
  auto bad = [](const std::string& what) { return data_loss("packed matrix descriptor: " + what); };
  constexpr int64_t kMaxDim = int64_t{1} << 31;
  if (d.outputs < 0 || d.cols < 0 || d.outputs > kMaxDim || d.cols > kMaxDim)
    return bad(fmt::format("shape [{}, {}] out of range", d.outputs, d.cols));
  if (d.epilogue != Epilogue::kStore && d.epilogue != Epilogue::kSwiGLU)
    return bad("unknown epilogue");
  const int64_t packed_rows = d.epilogue == Epilogue::kSwiGLU ? (d.outputs + kPanelWidth / 2 - 1) /
                                                                    (kPanelWidth / 2) * kPanelWidth
                                                              : d.outputs;
  if (d.panels != (packed_rows + kPanelWidth - 1) / kPanelWidth)
    return bad(fmt::format("{} panels for {} outputs", d.panels, d.outputs));
  PackedMatrix p;
  p.desc_ = d;
  if (!p.quantized()) {  // float layouts carry no quantized panels, as packing leaves them
    p.desc_.quant_bytes = 0;
    p.desc_.quant_panels.clear();
  }
  switch (d.layout) {
    case Layout::kPanels:
      if (d.dtype != DType::kF32 && d.dtype != DType::kBF16 && d.dtype != DType::kF16)
        return bad("a float layout with a non-float element type");
      break;
    case Layout::kBf16Pairs:
      if (d.dtype != DType::kBF16) return bad("the bf16 pair layout with a non-bf16 element type");
      break;
    case Layout::kQuant:
    case Layout::kQuantInt8: {
      if (d.dtype != DType::kU8) return bad("a quantized layout with a float element type");
      if (static_cast<int64_t>(d.quant_panels.size()) != d.panels)
        return bad(fmt::format("{} quantized panel entries for {} panels", d.quant_panels.size(),
                               d.panels));
      int64_t offset = 0;
      for (const QuantPanel& qp : d.quant_panels) {
        const std::optional<QuantPanelFormat> format = quant_panel_format(qp.type);
        if (!format || d.cols % format->block_cols != 0)
          return bad(fmt::format("panel type {} does not fit {} columns",
                                 quant::ggml_type_name(qp.type), d.cols));
        if (qp.offset != offset)
          return bad(fmt::format("panel at offset {}, expected {}", qp.offset, offset));
        offset += d.cols / format->block_cols * format->block_bytes;
      }
      if (d.quant_bytes != offset)
        return bad(fmt::format("{} quantized bytes, the panels take {}", d.quant_bytes, offset));
      break;
    }
    default:
      return bad("unknown layout");
  }
  if (p.bytes() != size)
    return bad(fmt::format("{} bytes given, the layout takes {}", size, p.bytes()));
  if (size > 0 && (bytes == nullptr || reinterpret_cast<uintptr_t>(bytes.get()) % 64 != 0))
    return bad("bytes missing or not 64-byte aligned");
  p.data_ = std::move(bytes);
  return p;
}

PackedMatrix PackedMatrix::pack(const WeightMatrix& w, Options options) {
  return pack_concat({w}, options);
}

PackedMatrix PackedMatrix::pack_concat(const std::vector<WeightMatrix>& parts, Options options) {
  if (parts.empty()) return {};
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.rows;
  const int64_t cols = parts.front().cols;
  auto source = [&](int64_t packed_row) {
    for (const auto& p : parts) {
      if (packed_row < p.rows) return RowRef{&p, packed_row};
      packed_row -= p.rows;
    }
    return RowRef{};
  };
  if (any_quantized(parts) && quant_packable(parts, true))
    return build_quant(Epilogue::kStore, int8_layout(options), rows, rows, cols, source);
  return build(common_dtype(parts), Epilogue::kStore, options, rows, rows, cols, source);
}

PackedMatrix PackedMatrix::pack_swiglu(const WeightMatrix& gate, const WeightMatrix& up,
                                       Options options) {
  const std::vector<WeightMatrix> parts = {gate, up};
  const int64_t n = gate.rows;
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t panels = (n + kHalf - 1) / kHalf;
  auto source = [&](int64_t packed_row) {
    const int64_t panel = packed_row / kPanelWidth, slot = packed_row % kPanelWidth;
    // The first half of a panel's slots hold gate rows, the second half up rows.
    const int64_t out = panel * kHalf + slot % kHalf;
    if (out >= n) return RowRef{};
    return RowRef{slot < kHalf ? &parts[0] : &parts[1], out};
  };
  if (any_quantized(parts) && quant_packable(parts, false))
    return build_quant(Epilogue::kSwiGLU, int8_layout(options), n, panels * kPanelWidth, gate.cols,
                       source);
  return build(common_dtype(parts), Epilogue::kSwiGLU, options, n, panels * kPanelWidth, gate.cols,
               source);
}

}  // namespace rlt::kernels
