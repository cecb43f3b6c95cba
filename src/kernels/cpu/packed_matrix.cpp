#include "kernels/cpu/packed_matrix.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace rlt::kernels {
namespace {

struct RowRef {
  const WeightMatrix* matrix = nullptr;  // null: a zero padding row
  int64_t row = 0;
};

// Writes row r of w into one slot of a panel: element c goes to dst + c * stride (elements), in
// the packed dtype.
template <typename T>
void scatter_row(const WeightMatrix& w, int64_t r, T* dst, int64_t stride) {
  if constexpr (sizeof(T) == 2) {
    const auto* src = static_cast<const uint16_t*>(w.data) + r * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) std::memcpy(dst + c * stride, src + c, 2);
  } else if (w.dtype == DType::kF32) {
    const auto* src = static_cast<const float*>(w.data) + r * w.cols;
    for (int64_t c = 0; c < w.cols; ++c) dst[c * stride] = src[c];
  } else {
    for (int64_t c = 0; c < w.cols; ++c)
      dst[c * stride] = w.at(r, c);  // mixed dtypes: widened to f32
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
PackedMatrix PackedMatrix::build(DType dtype, Epilogue epilogue, int64_t outputs,
                                 int64_t packed_rows, int64_t cols, SourceRow source) {
  PackedMatrix p;
  p.dtype_ = dtype;
  p.epilogue_ = epilogue;
  p.outputs_ = outputs;
  p.cols_ = cols;
  p.panels_ = (packed_rows + kPanelWidth - 1) / kPanelWidth;
  const size_t bytes = allocation_bytes(p.bytes());
  if (bytes == 0) return p;
  void* raw = std::aligned_alloc(64, bytes);
  if (raw == nullptr) throw std::bad_alloc();
  std::memset(raw, 0, bytes);
  p.data_.reset(raw);
  // Packing a 1.4B model moves gigabytes; panels are independent.
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < p.panels_; ++panel) {
    for (int64_t slot = 0; slot < kPanelWidth; ++slot) {
      const RowRef src = source(panel * kPanelWidth + slot);
      if (src.matrix == nullptr) continue;
      const int64_t offset = panel * kPanelWidth * cols + slot;
      if (dtype == DType::kF32) {
        scatter_row(*src.matrix, src.row, static_cast<float*>(raw) + offset, kPanelWidth);
      } else {
        scatter_row(*src.matrix, src.row, static_cast<uint16_t*>(raw) + offset, kPanelWidth);
      }
    }
  }
  return p;
}

PackedMatrix PackedMatrix::pack(const WeightMatrix& w) {
  return pack_concat({w});
}

PackedMatrix PackedMatrix::pack_concat(const std::vector<WeightMatrix>& parts) {
  if (parts.empty()) return {};
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.rows;
  const int64_t cols = parts.front().cols;
  return build(common_dtype(parts), Epilogue::kStore, rows, rows, cols, [&](int64_t packed_row) {
    for (const auto& p : parts) {
      if (packed_row < p.rows) return RowRef{&p, packed_row};
      packed_row -= p.rows;
    }
    return RowRef{};
  });
}

PackedMatrix PackedMatrix::pack_swiglu(const WeightMatrix& gate, const WeightMatrix& up) {
  const std::vector<WeightMatrix> parts = {gate, up};
  const int64_t n = gate.rows;
  constexpr int64_t kHalf = kPanelWidth / 2;
  const int64_t panels = (n + kHalf - 1) / kHalf;
  return build(common_dtype(parts), Epilogue::kSwiGLU, n, panels * kPanelWidth, gate.cols,
               [&](int64_t packed_row) {
                 const int64_t panel = packed_row / kPanelWidth, slot = packed_row % kPanelWidth;
                 const int64_t out =
                     panel * kHalf + slot % kHalf;  // first half of the slots gate, second half up
                 if (out >= n) return RowRef{};
                 return RowRef{slot < kHalf ? &parts[0] : &parts[1], out};
               });
}

}  // namespace rlt::kernels
