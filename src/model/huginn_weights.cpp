#include "model/huginn_weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "io/gguf_model.h"

namespace rlt::model {
namespace {

constexpr const char* kEmbedding = "transformer.wte.weight";

std::vector<std::string> block_prefixes(const io::ModelConfig& c) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < c.prelude_layers; ++i)
    out.push_back(fmt::format("transformer.prelude.{}.", i));
  for (int64_t i = 0; i < c.num_layers; ++i)
    out.push_back(fmt::format("transformer.core_block.{}.", i));
  for (int64_t i = 0; i < c.coda_layers; ++i) out.push_back(fmt::format("transformer.coda.{}.", i));
  return out;
}

kernels::WeightMatrix matrix(const io::TensorView& t, int64_t rows, int64_t cols,
                             int64_t first_row = 0) {
  const auto* data = static_cast<const uint8_t*>(t.data) +
                     first_row * cols * static_cast<int64_t>(dtype_size(t.dtype));
  return {t.dtype, rows, cols, data};
}

// The row of the checkpoint's q or k block that becomes row `row` (split-half order within each
// head of `head_dim`): the same map as llama.cpp's Q/K interleaving.
int64_t source_row(int64_t row, int64_t head_dim) {
  return io::gguf_interleaved_row(row, head_dim);
}

// Wqkv with q's and k's rows reordered, as a copy in the stored dtype.
std::vector<uint8_t> reordered_qkv(const io::TensorView& t, const io::ModelConfig& c) {
  const int64_t h = c.hidden_size;
  const size_t row_bytes = static_cast<size_t>(h) * dtype_size(t.dtype);
  std::vector<uint8_t> out(static_cast<size_t>(3 * h) * row_bytes);
  const auto* src = static_cast<const uint8_t*>(t.data);
  for (int64_t r = 0; r < 3 * h; ++r) {
    const int64_t block = r / h, within = r % h;
    const int64_t from = block < 2 ? block * h + source_row(within, c.head_dim) : r;
    std::memcpy(out.data() + static_cast<size_t>(r) * row_bytes,
                src + static_cast<size_t>(from) * row_bytes, row_bytes);
  }
  return out;
}

std::vector<float> reordered_bias(const io::TensorView& t, const io::ModelConfig& c) {
  const std::vector<float> raw = widen_to_f32(t);  // [2, 1, heads, head_dim]: q's, then k's
  const int64_t h = c.hidden_size;
  std::vector<float> out(raw.size());
  for (int64_t block = 0; block < 2; ++block)
    for (int64_t r = 0; r < h; ++r)
      out[static_cast<size_t>(block * h + r)] =
          raw[static_cast<size_t>(block * h + source_row(r, c.head_dim))];
  return out;
}

// An export's lm_head must be the embedding (the model ties them).
Status check_tied_head(const io::TensorView& head, const io::TensorView& wte) {
  const bool same = head.dtype == wte.dtype && head.nbytes == wte.nbytes &&
                    std::memcmp(head.data, wte.data, head.nbytes) == 0;
  if (same) return {};
  if (head.dtype != wte.dtype) {
    std::vector<float> a(static_cast<size_t>(wte.shape[1])), b(a.size());
    bool equal = true;
    for (int64_t r = 0; r < wte.shape[0] && equal; ++r) {
      matrix(head, head.shape[0], head.shape[1]).row_to_f32(r, a.data());
      matrix(wte, wte.shape[0], wte.shape[1]).row_to_f32(r, b.data());
      equal = a == b;
    }
    if (equal) return {};
  }
  return invalid_argument(fmt::format(
      "{}: lm_head.weight differs from transformer.wte.weight, but Huginn ties its head to the "
      "embedding; re-export the checkpoint without lm_head.weight (or with the embedding's values)",
      head.file));
}

// freqs_cis [1, positions, 1, head_dim / 2, 2]: (cos, sin) of position · base^(-2i/d). The
// stored table is how a real checkpoint settles the RoPE base; one that disagrees with the
// config's would give other attention scores.
Status check_rope_table(const io::TensorView& t, const io::ModelConfig& c) {
  const std::vector<float> table = widen_to_f32(t);
  // The table's own rounding: 16-bit floats near ±1 are 2e-3 apart at worst.
  const double tolerance = t.dtype == DType::kF32 ? 1e-3 : 4e-3;
  const int64_t half = c.head_dim / 2;
  const int64_t positions = static_cast<int64_t>(table.size()) / (2 * half);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
      const size_t at = static_cast<size_t>((p * half + i) * 2);
      if (std::abs(table[at] - std::cos(angle)) > tolerance ||
          std::abs(table[at + 1] - std::sin(angle)) > tolerance) {
        return invalid_argument(fmt::format(
            "{}: freqs_cis does not match RoPE with rope_base {} (position {}, pair {}); set "
            "config.json's rope_base to the base the table was computed with",
            t.file, c.rope_theta, p, i));
      }
    }
  }
  return {};
}

}  // namespace

std::vector<io::ExpectedTensor> huginn_expected_tensors(const io::ModelConfig& c,
                                                        const io::Checkpoint* present) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<io::ExpectedTensor> out = {{kEmbedding, {c.vocab_size, h}},
                                         {"transformer.ln_f.weight", {h}},
                                         {"transformer.adapter.weight", {h, 2 * h}}};
  for (const std::string& p : block_prefixes(c)) {
    for (int k = 1; k <= 4; ++k) out.push_back({fmt::format("{}norm_{}.weight", p, k), {h}});
    out.push_back({p + "attn.Wqkv.weight", {3 * h, h}});
    out.push_back({p + "attn.qk_bias", {2, 1, c.num_heads, c.head_dim}});
    out.push_back({p + "attn.proj.weight", {h, h}});
    out.push_back({p + "mlp.fc.weight", {2 * inter, h}});
    out.push_back({p + "mlp.proj.weight", {h, inter}});
  }
  if (present != nullptr && present->find("lm_head.weight") != nullptr)
    out.push_back({"lm_head.weight", {c.vocab_size, h}});
  if (present != nullptr && present->find("freqs_cis") != nullptr)
    out.push_back({"freqs_cis", {1, c.max_position_embeddings, 1, c.head_dim / 2, 2}});
  return out;
}

Result<OuroWeights> bind_huginn_weights(const io::Checkpoint& ckpt, const io::ModelConfig& c,
                                        kernels::PackOptions pack, bool pack_linear_layers) {
  RLT_RETURN_IF_ERROR(io::validate_tensor_set(ckpt, huginn_expected_tensors(c, &ckpt)));
  const io::TensorView* head = ckpt.find("lm_head.weight");
  const io::TensorView* table = ckpt.find("freqs_cis");
  for (const io::TensorView* t : {head, table}) {
    if (t != nullptr && t->quant)
      return invalid_argument(fmt::format(
          "{}: a Huginn tensor is quantized; rlt reads Huginn as float safetensors", t->file));
  }
  auto get = [&](const std::string& name) -> const io::TensorView& { return *ckpt.find(name); };
  if (head != nullptr) RLT_RETURN_IF_ERROR(check_tied_head(*head, get(kEmbedding)));
  if (table != nullptr) RLT_RETURN_IF_ERROR(check_rope_table(*table, c));

  OuroWeights w;
  const io::TensorView& wte = get(kEmbedding);
  w.embed_tokens = matrix(wte, c.vocab_size, c.hidden_size);
  w.final_norm = widen_to_f32(get("transformer.ln_f.weight"));
  w.layers.resize(static_cast<size_t>(c.num_layers));
  w.prelude.resize(static_cast<size_t>(c.prelude_layers));
  w.coda.resize(static_cast<size_t>(c.coda_layers));
  std::vector<OuroLayerWeights*> blocks;
  for (auto* group : {&w.prelude, &w.layers, &w.coda})
    for (OuroLayerWeights& l : *group) blocks.push_back(&l);
  const std::vector<std::string> prefixes = block_prefixes(c);
  for (size_t b = 0; b < blocks.size(); ++b) {
    OuroLayerWeights& l = *blocks[b];
    const std::string& p = prefixes[b];
    l.input_norm = widen_to_f32(get(p + "norm_1.weight"));
    l.attn_out_norm = widen_to_f32(get(p + "norm_2.weight"));
    l.post_attn_norm = widen_to_f32(get(p + "norm_3.weight"));
    l.mlp_out_norm = widen_to_f32(get(p + "norm_4.weight"));
    l.qk_bias = reordered_bias(get(p + "attn.qk_bias"), c);
    if (!pack_linear_layers) continue;
    const io::TensorView& qkv = get(p + "attn.Wqkv.weight");
    const std::vector<uint8_t> reordered = reordered_qkv(qkv, c);
    l.qkv = kernels::PackedMatrix::pack(
        {qkv.dtype, 3 * c.hidden_size, c.hidden_size, reordered.data()}, pack);
    l.o_proj = kernels::PackedMatrix::pack(
        matrix(get(p + "attn.proj.weight"), c.hidden_size, c.hidden_size), pack);
    const io::TensorView& fc = get(p + "mlp.fc.weight");
    l.gate_up = kernels::PackedMatrix::pack_swiglu(
        matrix(fc, c.intermediate_size, c.hidden_size),
        matrix(fc, c.intermediate_size, c.hidden_size, c.intermediate_size), pack);
    l.down_proj = kernels::PackedMatrix::pack(
        matrix(get(p + "mlp.proj.weight"), c.hidden_size, c.intermediate_size), pack);
  }
  if (pack_linear_layers) {
    w.adapter = kernels::PackedMatrix::pack(
        matrix(get("transformer.adapter.weight"), c.hidden_size, 2 * c.hidden_size), pack);
    w.lm_head = kernels::PackedMatrix::pack(w.embed_tokens, pack);
  }
  return w;
}

}  // namespace rlt::model
