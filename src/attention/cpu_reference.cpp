// cpu_reference: gathers each sequence's visible K/V into contiguous f32 and runs the dense
// single-row attention of the reference model. Slow and obviously right: the oracle that every
// other backend is compared with. Its arithmetic is exactly the dense reference model's, so a
// paged engine using it with f32 K/V reproduces the reference model bit for bit.
#include <vector>

#include "attention/backend.h"
#include "common/half.h"
#include "kernels/cpu/dense_attention.h"
#include "quant/dequantize.h"

namespace rlt::attention {
namespace {

// The d values of the head at `offset` (view units) as f32.
void load_head(const PagedKVLayerView& view, int64_t offset, int64_t d, float* out) {
  if (view.dtype == DType::kQ8_0) {
    const auto* blocks = static_cast<const uint8_t*>(view.base) + offset;
    const Status s = quant::dequantize_row(quant::GgmlType::kQ8_0, blocks, d, out);
    (void)s;  // whole blocks (d % 32 == 0: KVGeometry::validate)
    return;
  }
  for (int64_t i = 0; i < d; ++i) {
    switch (view.dtype) {
      case DType::kBF16:
        out[i] = bf16_to_f32(static_cast<const uint16_t*>(view.base)[offset + i]);
        break;
      case DType::kF16:
        out[i] = f16_to_f32(static_cast<const uint16_t*>(view.base)[offset + i]);
        break;
      default:
        out[i] = static_cast<const float*>(view.base)[offset + i];
    }
  }
}

class CpuReferenceBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "cpu_reference"; }

  Status run(const AttentionParams& p) override {
    const int64_t d = p.head_dim(), kv_heads = p.num_kv_heads();
    const int64_t kv_row = kv_heads * d;
    const kernels::DenseAttentionShape shape{p.num_q_heads, kv_heads, d};
    for (int64_t s = 0; s < p.num_seqs; ++s) {
      const int32_t* table = p.block_tables + s * p.table_width;
      const int64_t len = p.context_lengths[s];
      k_.resize(static_cast<size_t>(len * kv_row));
      v_.resize(k_.size());
      scores_.resize(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) {
        for (int64_t h = 0; h < kv_heads; ++h) {
          load_head(p.k, kv_offset(p.k, table, t, h), d, k_.data() + t * kv_row + h * d);
          load_head(p.v, kv_offset(p.v, table, t, h), d, v_.data() + t * kv_row + h * d);
        }
      }
      const int64_t begin = p.seq_begin(s), n = p.seq_end(s) - begin;
      for (int64_t j = 0; j < n; ++j) {
        const int64_t visible = len - n + j + 1;  // bottom-right causal alignment
        const int64_t row = (begin + j) * p.num_q_heads * d;
        kernels::dense_attention_row(shape, p.q + row, k_.data(), v_.data(), visible, scores_.data(), p.out + row);
      }
    }
    return {};
  }

 private:
  std::vector<float> k_, v_, scores_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cpu_reference_backend() { return std::make_unique<CpuReferenceBackend>(); }

}  // namespace rlt::attention
