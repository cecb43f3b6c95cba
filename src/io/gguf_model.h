// A GGUF file as a model rlt runs: its metadata as a ModelConfig, its tensors under the Hugging
// Face names the model binds (dequantized or converted to the weight dtype asked for), and what
// the file holds by tensor type. Architectures: `llama` and `ouro` as llama.cpp's converter
// writes them, plus rlt's own Ouro keys (the exit gate, which llama.cpp drops).
//
// llama.cpp stores each head's Q and K rows interleaved for its RoPE convention (pairs 2i, 2i+1);
// the rows are put back in the Hugging Face order (i, i + head_dim/2) on load, so the function
// computed is the checkpoint's.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "io/gguf_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "rlt/status.h"

namespace rlt::io {

struct GgufModelInfo {
  ModelConfig config;
  GenerationConfig generation;     // stop ids: eos, eot, eom
  std::vector<std::string> notes;  // what the file lacks and what rlt does about it
};

// Reads the model metadata. Keys of the architecture that rlt does not know are refused by name
// (they may change the math); general.* and tokenizer.* are not model math.
Result<GgufModelInfo> read_gguf_model_info(const GgufFile& file);

// How quantized tensors are loaded: matrices of a type in `keep` stay in their GGML blocks
// (TensorView::quant, used in place from the mapping unless their rows need reordering); other
// quantized matrices are dequantized into `matrix_dtype`, quantized vectors into f32.
struct QuantizedTensors {
  // Everything dequantized into `dtype` (implicit: a dtype alone is that request).
  QuantizedTensors(DType dtype = DType::kBF16, std::set<quant::GgmlType> kept = {})  // NOLINT
      : matrix_dtype(dtype), keep(std::move(kept)) {}
  DType matrix_dtype;
  std::set<quant::GgmlType> keep;
};

// The tensors, named as in a Hugging Face checkpoint. F32, F16 and BF16 tensors keep their stored
// type, used in place from the mapping unless their rows need reordering (Q/K) or the mapping
// leaves them misaligned; quantized ones as `quantized` says, converted ones in buffers the
// checkpoint owns. With `deferred`, conversions wait until each tensor is materialized
// (TensorView::convert), so that loading converts a layer at a time.
Result<Checkpoint> gguf_checkpoint(std::shared_ptr<const GgufFile> file, const ModelConfig& config,
                                   const QuantizedTensors& quantized, bool deferred = false);

// The tensors gguf_checkpoint would produce (names, shapes, dtypes and sizes), without reading or
// converting any data: what `rlt info` validates.
Result<std::vector<TensorView>> gguf_tensor_plan(const GgufFile& file, const ModelConfig& config,
                                                 const QuantizedTensors& quantized);

struct GgufTypeCount {
  std::string type;  // "Q4_1"
  int64_t tensors = 0;
  int64_t bytes = 0;
};
// The GGUF name of a Hugging Face tensor name in llama.cpp's layout (rlt's own names for Ouro's
// exit gate), the inverse of the reader's mapping; nullopt for a name outside it.
std::optional<std::string> gguf_tensor_name(const std::string& hf_name, bool ouro);
// llama.cpp's converter interleaves each head's Q/K rows for its RoPE convention: the stored row
// that holds Hugging Face row `row` (heads of `head_dim` rows).
int64_t gguf_interleaved_row(int64_t row, int64_t head_dim);

// Tensor count and bytes per GGML type, most bytes first.
std::vector<GgufTypeCount> gguf_type_summary(const GgufFile& file);

}  // namespace rlt::io
