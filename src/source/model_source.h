// What `--model` names: a Hugging Face model folder (config.json, safetensors, tokenizer.json,
// chat template) or a GGUF file (metadata, tensors, tokenizer and chat template in one file).
// Opening one reads only metadata; the tensors are opened (and converted) on request, so `rlt
// info` and the server's tokenizer never touch the weights.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "io/gguf_file.h"
#include "io/gguf_model.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "rlt/config.h"
#include "rlt/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace rlt::source {

enum class ModelFormat { kHuggingFaceFolder, kGguf };

class ModelSource {
 public:
  // A folder, or a file starting with the GGUF magic (whatever its name). Errors say what the
  // path is and what rlt expected.
  static Result<ModelSource> open(const std::string& path);

  const std::string& path() const { return path_; }
  ModelFormat format() const { return format_; }
  std::string format_name() const;  // "hugging face folder" / "gguf"
  // The default served model name: the folder's name, or the file's name without ".gguf".
  std::string default_name() const;
  const io::ModelConfig& config() const { return config_; }
  const io::GenerationConfig& generation() const { return generation_; }
  // What the source lacks and what rlt does about it (e.g. a GGUF without the exit gate).
  const std::vector<std::string>& notes() const { return notes_; }
  // The GGUF file (GGUF sources only).
  const io::GgufFile* gguf() const { return gguf_.get(); }

  // The weights. GGUF tensors in a quantized type are kept or dequantized as `quantized` says;
  // with `deferred`, on request (io::Checkpoint::materialize) rather than all at once here.
  Result<io::Checkpoint> open_checkpoint(const io::QuantizedTensors& quantized = {},
                                         bool deferred = false) const;
  // tokenizer.json (folders), the tokenizer.ggml.* metadata (GGUF; a tokenizer.json next to the
  // file is used when the metadata names a pre-tokenizer rlt does not know).
  Result<std::shared_ptr<const tok::Tokenizer>> tokenizer() const;
  bool has_tokenizer() const;
  // The chat template: chat_template.jinja / chat_template.json / tokenizer_config.json
  // (folders), tokenizer.chat_template (GGUF).
  Result<tok::ChatTemplate> chat_template() const;

 private:
  std::string path_;
  ModelFormat format_ = ModelFormat::kHuggingFaceFolder;
  io::ModelConfig config_;
  io::GenerationConfig generation_;
  std::vector<std::string> notes_;
  std::shared_ptr<const io::GgufFile> gguf_;
};

// The tokenizer.ggml.* metadata of a GGUF file as plain data (tokenizer_from_gguf builds it).
Result<tok::GgufVocab> read_gguf_vocab(const io::GgufFile& file);

// The element type of dequantized weights (--dtype).
DType weight_dtype(WeightDType dtype);

}  // namespace rlt::source
