// Writes a checkpoint (tensors under Hugging Face names, any source rlt reads) as a GGUF file in
// llama.cpp's layout, its linear layers in one GGML type: what `rlt convert --to gguf` does.
//
// Layout: llama.cpp's tensor names and metadata keys (`llama.*` / `ouro.*`), each head's Q and K
// rows interleaved as llama.cpp's converter stores them, norms and other vectors in F32. For Ouro
// the exit gate is kept under rlt's own names (`exit_gate.weight`, `exit_gate.bias`, and the key
// `ouro.early_exit_threshold`), which llama.cpp ignores and rlt reads. The embedding stays as
// stored (a quantized GGUF embedding keeps its blocks): it is read a row per token, never streamed
// as a matrix, as with `--quantize`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::io {

struct GgufExportOptions {
  // The linear layers' type: Q8_0, Q4_K, Q6_K (ggml's reference quantizers), or F32 / F16 / BF16.
  // A matrix whose width is not a whole number of a K-quant's blocks falls back to Q8_0, as
  // llama.cpp's quantizer does, and to F32 when not even Q8_0's 32 divide it; the report says so.
  quant::GgmlType matrix_type = quant::GgmlType::kQ8_0;
  // A GGUF source: every metadata key is copied (tokenizer and chat template included) but the
  // file type; without one the keys are written from the config (no tokenizer vocabulary).
  const GgufFile* metadata_from = nullptr;
  std::string name;  // general.name when written from the config
};

struct GgufExportReport {
  int64_t tensors = 0;
  int64_t bytes = 0;                     // tensor data
  std::map<std::string, int64_t> types;  // tensors per GGML type name
  std::vector<std::string> notes;        // fallbacks
};

// Types export_gguf writes matrices in, for flag help and errors: "q8_0, q4_k, q6_k, f32, f16,
// bf16".
std::string gguf_export_types();
// "q4_k" -> kQ4_K; an error listing gguf_export_types() otherwise.
Result<quant::GgmlType> parse_gguf_export_type(std::string_view name);

Result<GgufExportReport> export_gguf(const Checkpoint& checkpoint, const ModelConfig& config,
                                     const GgufExportOptions& options, const std::string& path);

}  // namespace rlt::io
