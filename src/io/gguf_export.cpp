#include "io/gguf_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

#include "io/gguf_model.h"
#include "io/gguf_writer.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace rlt::io {
namespace {

using quant::GgmlType;

constexpr std::pair<std::string_view, GgmlType> kTypes[] = {
    {"q8_0", GgmlType::kQ8_0}, {"q4_k", GgmlType::kQ4_K}, {"q6_k", GgmlType::kQ6_K},
    {"f32", GgmlType::kF32},   {"f16", GgmlType::kF16},   {"bf16", GgmlType::kBF16}};

// llama.cpp's general.file_type for a file whose matrices are all `t` (llama_ftype).
uint32_t llama_file_type(GgmlType t) {
  switch (t) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kQ4_K:
      return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K
    case GgmlType::kQ6_K:
      return 18;
    default:
      return 32;  // MOSTLY_BF16
  }
}

GgmlType ggml_float_type(DType d) {
  switch (d) {
    case DType::kF16:
      return GgmlType::kF16;
    case DType::kBF16:
      return GgmlType::kBF16;
    default:
      return GgmlType::kF32;
  }
}

// Row r of a tensor (float or GGML blocks) as f32.
Status row_f32(const TensorView& t, int64_t r, int64_t cols, float* out) {
  if (t.quant) {
    const int64_t row_bytes = *quant::ggml_row_bytes(*t.quant, cols);
    return quant::dequantize_row(*t.quant, t.data + r * row_bytes, cols, out);
  }
  const GgmlType type = ggml_float_type(t.dtype);
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    return invalid_argument(
        fmt::format("tensor '{}' is {}, not a float type", t.name, dtype_name(t.dtype)));
  return quant::dequantize_row(type, t.data + r * cols * static_cast<int64_t>(dtype_size(t.dtype)),
                               cols, out);
}

struct Planned {
  std::string gguf_name;
  const TensorView* tensor = nullptr;
  GgmlType type = GgmlType::kF32;
  bool interleave = false;  // Q/K rows into llama.cpp's order
  bool copy = false;        // bytes as stored (same type, rows in order)
};

// Where a tensor sorts in the file: globals first, then layer by layer (as llama.cpp's writer).
std::pair<int64_t, std::string> file_order(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return {-1, gguf_name};
  return {std::atoll(gguf_name.c_str() + 4), gguf_name};
}

Result<std::vector<uint8_t>> tensor_bytes(const Planned& p, const ModelConfig& c) {
  const TensorView& t = *p.tensor;
  const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  if (p.copy) return std::vector<uint8_t>(t.data, t.data + t.nbytes);
  const int64_t row_bytes = *quant::ggml_row_bytes(p.type, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  Status failed;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      Status st = row_f32(t, r, cols, row.data());
      const int64_t dst = p.interleave ? gguf_interleaved_row(r, c.head_dim) : r;
      if (st.ok()) st = quant::quantize_row(p.type, row.data(), cols, out.data() + dst * row_bytes);
      if (!st.ok()) {
#pragma omp critical
        failed = st;
      }
    }
  }
  if (!failed.ok()) return failed.with_context(fmt::format("tensor '{}'", t.name));
  return out;
}

// The model's metadata from its config, in llama.cpp's keys.
void config_metadata(const ModelConfig& c, const GgufExportOptions& o, GgufWriter& w) {
  const bool ouro = c.architecture == Architecture::kOuro;
  const std::string arch = architecture_name(c.architecture), p = arch + ".";
  w.add_string("general.architecture", arch);
  if (!o.name.empty()) w.add_string("general.name", o.name);
  w.add_u32(p + "context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.add_u32(p + "embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.add_u32(p + "block_count", static_cast<uint32_t>(c.num_layers));
  w.add_u32(p + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.add_u32(p + "attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.add_u32(p + "attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.add_u32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.add_u32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.add_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.add_f32(p + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_u32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  if (c.rope_scaling.kind == RopeScaling::Kind::kLinear) {
    w.add_string(p + "rope.scaling.type", "linear");
    w.add_f32(p + "rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }
  w.add_u32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (c.architecture != Architecture::kLlama) {  // ouro and nanbeige: the loop keys
    w.add_u32(p + "num_loops", static_cast<uint32_t>(c.total_ut_steps));
    w.add_bool(p + "skip_loop_final_norm", false);
  }
  if (ouro) {
    if (c.has_exit_gate())
      w.add_f32(p + "early_exit_threshold", static_cast<float>(c.early_exit_threshold));
  }
  if (c.bos_token_id)
    w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*c.bos_token_id));
  if (!c.eos_token_ids.empty())
    w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids.front()));
  if (c.pad_token_id)
    w.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*c.pad_token_id));
}

}  // namespace

std::string gguf_export_types() {
  std::string s;
  for (const auto& [name, _] : kTypes) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

Result<GgmlType> parse_gguf_export_type(std::string_view name) {
  for (const auto& [n, t] : kTypes)
    if (n == name) return t;
  return invalid_argument(
      fmt::format("unknown GGUF type '{}' (accepted: {})", name, gguf_export_types()));
}

Result<GgufExportReport> export_gguf(const Checkpoint& checkpoint, const ModelConfig& c,
                                     const GgufExportOptions& o, const std::string& path) {
  const bool ouro = c.architecture == Architecture::kOuro;
  const GgmlType wanted = o.matrix_type;
  GgufExportReport report;
  std::vector<Planned> plan;
  std::map<std::string, int64_t> fallbacks;  // type written instead -> matrices
  for (const auto& [name, t] : checkpoint.tensors()) {
    const std::optional<std::string> gguf_name = gguf_tensor_name(name, ouro);
    if (!gguf_name) {
      return invalid_argument(
          fmt::format("tensor '{}' has no GGUF name in the {} layout rlt writes (from {})", name,
                      architecture_name(c.architecture), t.file));
    }
    Planned p{*gguf_name, &t};
    const bool gate = name.rfind("model.early_exit_gate.", 0) == 0;
    const bool embedding = name == "model.embed_tokens.weight";
    const bool matrix = t.shape.size() == 2 && t.shape[0] > 1 && !gate;
    if (embedding) {  // as stored: a row per token is read, never streamed
      p.copy = true;
      p.type = t.quant ? *t.quant : ggml_float_type(t.dtype);
    } else if (matrix) {
      p.type = wanted;
      if (!quant::ggml_row_bytes(p.type, t.shape[1])) p.type = GgmlType::kQ8_0;
      if (!quant::ggml_row_bytes(p.type, t.shape[1])) p.type = GgmlType::kF32;
      if (p.type != wanted) ++fallbacks[std::string(quant::ggml_type_name(p.type))];
      p.interleave =
          name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.k_proj.weight");
    } else {
      p.type = GgmlType::kF32;  // norms, the exit gate: F32, as llama.cpp's converter writes them
    }
    plan.push_back(p);
  }
  for (const auto& [type, count] : fallbacks) {
    report.notes.push_back(fmt::format(
        "{} matri{} with an input width not a whole number of {}'s blocks: written as {}", count,
        count == 1 ? "x" : "ces", quant::ggml_type_name(wanted), type));
  }
  std::sort(plan.begin(), plan.end(), [](const Planned& a, const Planned& b) {
    return file_order(a.gguf_name) < file_order(b.gguf_name);
  });

  GgufWriter w;
  if (o.metadata_from != nullptr) {
    for (const auto& [key, value] : o.metadata_from->metadata())
      if (key != "general.alignment") w.add(key, value);
  } else {
    config_metadata(c, o, w);
  }
  w.add_u32("general.file_type", llama_file_type(wanted));
  w.add_u32("general.quantization_version", 2);
  for (const Planned& p : plan) {
    RLT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, tensor_bytes(p, c));
    std::vector<int64_t> ne(p.tensor->shape.rbegin(), p.tensor->shape.rend());
    report.bytes += static_cast<int64_t>(bytes.size());
    ++report.types[std::string(quant::ggml_type_name(p.type))];
    RLT_RETURN_IF_ERROR(w.add_tensor(p.gguf_name, std::move(ne), p.type, std::move(bytes)));
    ++report.tensors;
  }
  if (c.rope_scaling.kind == RopeScaling::Kind::kFrequencyFactors &&
      checkpoint.find("rope_freqs.weight") == nullptr) {
    const auto& f = c.rope_scaling.frequency_factors;
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    RLT_RETURN_IF_ERROR(w.add_tensor("rope_freqs.weight", {static_cast<int64_t>(f.size())},
                                     GgmlType::kF32, std::move(bytes)));
    ++report.tensors;
  }
  // Written beside the target and renamed: an interrupted run never leaves a truncated file
  // under the name asked for.
  const std::string partial = path + ".partial";
  RLT_RETURN_IF_ERROR(w.write(partial));
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    return io_error(fmt::format("cannot rename '{}' to '{}'", partial, path));
  }
  return report;
}

}  // namespace rlt::io
