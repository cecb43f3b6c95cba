#include "kernels/cpu/packed_matrix.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "kernels/cpu/linear_bf16.h"

namespace rlt::kernels {
namespace {

struct RowRef {
  const WeightMatrix* matrix = nullptr;  // null: a zero padding row
  int64_t row = 0;
};

// Writes columns first, first + step, ... of row r of w (step 1 or 2) into one slot of a panel:
// the j-th of them goes to dst + j * stride (elements), in the packed dtype. With step 2 and
// first 0 or 1, dst is offset by `first` too (the two halves of a column pair).
template <typename T>
void scatter_row(const WeightMatrix& w, int64_t r, T* dst, int64_t stride, int first = -1) {
  const int64_t step = first < 0 ? 1 : 2;
  const int64_t begin = first < 0 ? 0 : first;
  if (first > 0) dst += first;
  for (int64_t c = begin, j = 0; c < w.cols; c += step, ++j) {
    if constexpr (sizeof(T) == 2) {
      std::memcpy(dst + j * stride, static_cast<const uint16_t*>(w.data) + r * w.cols + c, 2);
    } else {
      dst[j * stride] = w.dtype == DType::kF32 ? static_cast<const float*>(w.data)[r * w.cols + c]
                                               : w.at(r, c);  // mixed dtypes: widened to f32
    }
  }
}

DType common_dtype(const std::vector<WeightMatrix>& parts) {
  for (const auto& p : parts)
    if (p.dtype != parts.front().dtype) return DType::kF32;
  return parts.front().dtype;
}

}  // namespace

size_t PackedMatrix::allocation_bytes(int64_t bytes) {
  constexpr size_t kAlign = 64;
  return (static_cast<size_t>(bytes) + kAlign - 1) / kAlign * kAlign;
}

PackedMatrix::PackedMatrix(const PackedMatrix& other)
    : dtype_(other.dtype_),
      epilogue_(other.epilogue_),
      layout_(other.layout_),
      outputs_(other.outputs_),
      cols_(other.cols_),
      panels_(other.panels_) {
  const size_t bytes = allocation_bytes(other.bytes());
  if (bytes == 0 || other.data_ == nullptr) return;
  void* raw = std::aligned_alloc(64, bytes);
  if (raw == nullptr) throw std::bad_alloc();
  std::memcpy(raw, other.data_.get(), bytes);
  data_.reset(raw);
}

PackedMatrix& PackedMatrix::operator=(const PackedMatrix& other) {
  if (this != &other) *this = PackedMatrix(other);
  return *this;
}

template <typename SourceRow>
PackedMatrix PackedMatrix::build(DType dtype, Epilogue epilogue, Options options, int64_t outputs,
                                 int64_t packed_rows, int64_t cols, SourceRow source) {
  PackedMatrix p;
  p.dtype_ = dtype;
  p.epilogue_ = epilogue;
  p.outputs_ = outputs;
  p.cols_ = cols;
  p.panels_ = (packed_rows + kPanelWidth - 1) / kPanelWidth;
  if (options.bf16_activations && dtype == DType::kBF16 && bf16_dot_supported())
    p.layout_ = Layout::kBf16Pairs;
  const size_t bytes = allocation_bytes(p.bytes());
  if (bytes == 0) return p;
  void* raw = std::aligned_alloc(64, bytes);
  if (raw == nullptr) throw std::bad_alloc();
  std::memset(raw, 0, bytes);
  p.data_.reset(raw);
  const int64_t stored_cols = p.stored_cols();
  // Packing a 1.4B model moves gigabytes; panels are independent.
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < p.panels_; ++panel) {
    for (int64_t slot = 0; slot < kPanelWidth; ++slot) {
      const RowRef src = source(panel * kPanelWidth + slot);
      if (src.matrix == nullptr) continue;
      const int64_t offset = panel * kPanelWidth * stored_cols;
      if (p.layout_ == Layout::kBf16Pairs) {
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

PackedMatrix PackedMatrix::pack(const WeightMatrix& w, Options options) {
  return pack_concat({w}, options);
}

PackedMatrix PackedMatrix::pack_concat(const std::vector<WeightMatrix>& parts, Options options) {
  if (parts.empty()) return {};
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.rows;
  const int64_t cols = parts.front().cols;
  return build(common_dtype(parts), Epilogue::kStore, options, rows, rows, cols,
               [&](int64_t packed_row) {
                 for (const auto& p : parts) {
                   if (packed_row < p.rows) return RowRef{&p, packed_row};
                   packed_row -= p.rows;
                 }
                 return RowRef{};
               });
}

PackedMatrix PackedMatrix::pack_swiglu(const WeightMatrix& gate, const WeightMatrix& up,
                                       Options options) {
  const std::vector<WeightMatrix> parts = {gate, up};
  const int64_t n = gate.rows;
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t panels = (n + kHalf - 1) / kHalf;
  return build(common_dtype(parts), Epilogue::kSwiGLU, options, n, panels * kPanelWidth, gate.cols,
               [&](int64_t packed_row) {
                 const int64_t panel = packed_row / kPanelWidth, slot = packed_row % kPanelWidth;
                 // The first half of a panel's slots hold gate rows, the second half up rows.
                 const int64_t out = panel * kHalf + slot % kHalf;
                 if (out >= n) return RowRef{};
                 return RowRef{slot < kHalf ? &parts[0] : &parts[1], out};
               });
}

}  // namespace rlt::kernels
