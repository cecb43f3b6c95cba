// Linear-layer weights re-laid out once at load time for the CPU kernels.
//
// Output rows are taken kPanelWidth at a time (a panel) and stored transposed within the panel:
// [panel][input column][output in panel]. For each input column the kernel loads the panel's
// kPanelWidth weights as whole vectors and multiplies them by one broadcast activation, so
// several input rows share every weight load (prefill) and a panel is one contiguous stream
// (decode). Outputs past the end of the matrix are zero padding.
//
// Two fusions are packing decisions, so the kernel stays one loop:
//   - concatenated rows (q, k and v projections as one matrix: one pass over the input);
//   - SwiGLU: each panel holds gate rows i..i+31 then up rows i..i+31, and the kernel writes
//     silu(gate)·up for outputs i..i+31 directly (gate and up activations never reach memory).
//
// GGML-quantized matrices (WeightMatrix::quant) keep their quantization: each panel is re-laid
// out in the block format of its source rows (quant_panels.h), which the quantized kernel reads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/weight_matrix.h"
#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::kernels {

struct PackOptions {
  // Use the bf16 dot-product kernel for bf16 weights where the CPU has it (activations are then
  // rounded to bf16). Ignored for other dtypes or CPUs.
  bool bf16_activations = false;
  // Lay quantized matrices out for the int8-activation kernel where the CPU has it
  // (linear_quant_int8.h); float matrices keep f32 activations.
  bool int8_activations = false;
  // The sources outlive the matrix (a checkpoint's mapping held by the model): 16-bit float rows
  // that would be packed as they are, into the f32-activation layout, are not packed yet: the
  // kernel computes from the rows where they are (transposing each block of a panel as packing
  // would) until PackedMatrix::complete_packing() has run, with the same results bit for bit.
  bool rows_in_place = false;
};

class PackedMatrix {
 public:
  static constexpr int64_t kPanelWidth = 64;

  enum class Epilogue {
    kStore,   // y[:, i] = row i · x
    kSwiGLU,  // y[:, i] = silu(gate row i · x) · (up row i · x)
  };

  enum class Layout {
    kPanels,     // [panel][column][output]: the f32-activation kernel
    kBf16Pairs,  // [panel][column pair][output][2], bf16: the bf16 dot-product kernel
    kQuant,      // each panel in the GGML block format of its rows (quant_panels.h)
    kQuantInt8,  // the same blocks with the quants in column quads: the int8-activation kernel
  };

  // Where a kQuant panel starts in data() and the block type its rows are stored in.
  struct QuantPanel {
    quant::GgmlType type;
    int64_t offset;
  };

  using Options = PackOptions;

  // Everything about a packed matrix but its bytes, as plain data (the packed-weight cache stores
  // it beside them).
  struct Descriptor {
    DType dtype = DType::kF32;
    Epilogue epilogue = Epilogue::kStore;
    Layout layout = Layout::kPanels;
    int64_t outputs = 0, cols = 0, panels = 0;
    int64_t quant_bytes = 0;
    std::vector<QuantPanel> quant_panels;
  };

  // Copies share the bytes: a packed matrix is never written after packing.
  PackedMatrix() = default;

  // Packs one [rows, cols] matrix.
  static PackedMatrix pack(const WeightMatrix& w, Options options = {});
  // Packs matrices with equal column counts as if their rows were concatenated in order.
  // Mixed float dtypes are widened to f32. Quantized parts stay quantized when every part is, in
  // types the quantized kernel computes on, and parts of different types meet at panel
  // boundaries; otherwise every part is dequantized to f32.
  static PackedMatrix pack_concat(const std::vector<WeightMatrix>& parts, Options options = {});
  // Packs gate and up projections ([n, cols] each) for the fused SwiGLU epilogue; n outputs.
  // Quantized gate and up stay quantized when they share a type the kernel computes on.
  static PackedMatrix pack_swiglu(const WeightMatrix& gate, const WeightMatrix& up,
                                  Options options = {});

  // A matrix over bytes held elsewhere (a mapped cache file), `size` of them from `bytes`, which
  // must be 64-byte aligned. The descriptor is checked for consistency with itself and with
  // `size` (an error says what does not fit), never trusted as given.
  static Result<PackedMatrix> from_bytes(const Descriptor& d, std::shared_ptr<const void> bytes,
                                         int64_t size);
  const Descriptor& descriptor() const { return desc_; }

  // The element type of the float layouts (kU8 for the quantized ones).
  DType dtype() const { return desc_.dtype; }
  Epilogue epilogue() const { return desc_.epilogue; }
  Layout layout() const { return desc_.layout; }
  int64_t outputs() const { return desc_.outputs; }  // columns of the result
  int64_t cols() const { return desc_.cols; }        // input features
  int64_t panels() const { return desc_.panels; }
  // The packed bytes; null while packing is deferred (pending_rows()).
  const void* data() const;
  // Packing deferred (PackOptions::rows_in_place) and not yet done: the source row of every packed
  // row (panels() * kPanelWidth of them, null for zero padding); else null. Once it returns null
  // it stays null.
  const uint16_t* const* pending_rows() const;
  // Packs a deferred matrix now (on the calling thread) and publishes the bytes: kernels running
  // meanwhile read the rows or the bytes, both valid. Not to be run on one matrix by two threads
  // at once; nothing to do for a matrix packed already.
  void complete_packing() const;
  // kQuant, kQuantInt8: one entry per panel.
  const std::vector<QuantPanel>& quant_panels() const { return desc_.quant_panels; }
  bool quantized() const {
    return desc_.layout == Layout::kQuant || desc_.layout == Layout::kQuantInt8;
  }
  // Weight bytes one pass streams (padding included).
  int64_t bytes() const {
    if (quantized()) return desc_.quant_bytes;
    return desc_.panels * kPanelWidth * stored_cols() *
           static_cast<int64_t>(dtype_size(desc_.dtype));
  }
  // Columns as stored: rounded up to whole pairs in the kBf16Pairs layout.
  int64_t stored_cols() const {
    return desc_.layout == Layout::kBf16Pairs ? (desc_.cols + 1) / 2 * 2 : desc_.cols;
  }
  bool empty() const { return desc_.outputs == 0; }

 private:
  // source(packed_row) gives the matrix and row that packed row `packed_row` of the layout holds,
  // or a null matrix for zero padding.
  template <typename SourceRow>
  static PackedMatrix build(DType dtype, Epilogue epilogue, Options options, int64_t outputs,
                            int64_t packed_rows, int64_t cols, SourceRow source);
  template <typename SourceRow>
  static PackedMatrix build_quant(Epilogue epilogue, bool int8, int64_t outputs,
                                  int64_t packed_rows, int64_t cols, SourceRow source);

  struct Deferred;

  Descriptor desc_;
  std::shared_ptr<const void> data_;
  std::shared_ptr<Deferred> deferred_;  // rows_in_place: shared by copies
};

// Columns [begin, end) of 64 rows of `cols` 16-bit elements (a null row reads as zeros) in the
// panel layout, dst[(c - begin) * 64 + row] = rows[row][c]: how packing fills a panel and how the
// kernel lays out a block of a pending panel (pending_rows()) as it computes (the columns after
// `end` are prefetched).
void transpose_panel_u16(const uint16_t* const* rows, int64_t cols, int64_t begin, int64_t end,
                         uint16_t* dst);

}  // namespace rlt::kernels
