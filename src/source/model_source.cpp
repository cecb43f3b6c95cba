#include "source/model_source.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "io/gguf_model.h"
#include "tokenizer/gguf_vocab.h"

namespace rlt::source {
namespace fs = std::filesystem;
namespace {

bool starts_with_gguf_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

template <typename T>
Status take(Result<std::optional<T>> r, std::optional<T>* out) {
  if (!r.ok()) return r.status();
  *out = std::move(r).value();
  return {};
}

}  // namespace

Result<tok::GgufVocab> read_gguf_vocab(const io::GgufFile& f) {
  tok::GgufVocab v;
  std::optional<std::string> model, pre;
  RLT_RETURN_IF_ERROR(take(f.get_string("tokenizer.ggml.model"), &model));
  if (!model)
    return not_found(fmt::format("{} has no tokenizer (no tokenizer.ggml.model key)", f.path()));
  v.model = *model;
  RLT_RETURN_IF_ERROR(take(f.get_string("tokenizer.ggml.pre"), &pre));
  v.pre = pre.value_or("");
  std::optional<std::vector<std::string>> tokens, merges;
  RLT_RETURN_IF_ERROR(take(f.get_string_array("tokenizer.ggml.tokens"), &tokens));
  RLT_RETURN_IF_ERROR(take(f.get_string_array("tokenizer.ggml.merges"), &merges));
  v.tokens = tokens.value_or(std::vector<std::string>{});
  v.merges = merges.value_or(std::vector<std::string>{});
  std::optional<std::vector<int64_t>> types;
  RLT_RETURN_IF_ERROR(take(f.get_int_array("tokenizer.ggml.token_type"), &types));
  if (types) {
    for (int64_t t : *types) {
      if (t < 0 || t > 6)
        return invalid_argument(
            fmt::format("{}: tokenizer.ggml.token_type holds {}, not 0..6", f.path(), t));
      v.token_types.push_back(static_cast<int32_t>(t));
    }
  }
  std::optional<std::vector<double>> scores;
  RLT_RETURN_IF_ERROR(take(f.get_float_array("tokenizer.ggml.scores"), &scores));
  if (scores)
    for (double s : *scores) v.scores.push_back(static_cast<float>(s));
  auto id = [&](const char* key, std::optional<int32_t>* out) -> Status {
    std::optional<int64_t> x;
    RLT_RETURN_IF_ERROR(take(f.get_int(key), &x));
    if (x && (*x < 0 || *x >= static_cast<int64_t>(v.tokens.size())))
      return invalid_argument(fmt::format("{}: {} = {} is not a token id (the vocabulary has {})",
                                          f.path(), key, *x, v.tokens.size()));
    if (x) *out = static_cast<int32_t>(*x);
    return {};
  };
  RLT_RETURN_IF_ERROR(id("tokenizer.ggml.bos_token_id", &v.bos));
  RLT_RETURN_IF_ERROR(id("tokenizer.ggml.eos_token_id", &v.eos));
  RLT_RETURN_IF_ERROR(id("tokenizer.ggml.unknown_token_id", &v.unk));
  RLT_RETURN_IF_ERROR(take(f.get_bool("tokenizer.ggml.add_bos_token"), &v.add_bos));
  RLT_RETURN_IF_ERROR(take(f.get_bool("tokenizer.ggml.add_eos_token"), &v.add_eos));
  RLT_RETURN_IF_ERROR(take(f.get_bool("tokenizer.ggml.add_space_prefix"), &v.add_space_prefix));
  return v;
}

namespace {

std::string beside(const std::string& gguf_path, const char* name) {
  return (fs::path(gguf_path).parent_path() / name).string();
}

}  // namespace

DType weight_dtype(WeightDType dtype) {
  switch (dtype) {
    case WeightDType::kF32:
      return DType::kF32;
    case WeightDType::kF16:
      return DType::kF16;
    case WeightDType::kAuto:  // what the kernels cannot compute on as stored
    case WeightDType::kBF16:
      break;
  }
  return DType::kBF16;
}

Result<ModelSource> ModelSource::open(const std::string& path) {
  ModelSource s;
  s.path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    s.format_ = ModelFormat::kHuggingFaceFolder;
    const std::string config = (fs::path(path) / "config.json").string();
    if (!fs::exists(config, ec)) {
      return not_found(
          fmt::format("'{}' is a folder without config.json; point --model at a Hugging Face model "
                      "folder or a .gguf file",
                      path));
    }
    RLT_ASSIGN_OR_RETURN(s.config_, io::load_model_config(config));
    RLT_ASSIGN_OR_RETURN(s.generation_, io::load_generation_config(
                                            (fs::path(path) / "generation_config.json").string()));
    for (int64_t id : s.generation_.eos_token_ids) {
      if (id >= s.config_.vocab_size) {
        return invalid_argument(
            fmt::format("{}/generation_config.json: eos_token_id {} is outside the vocabulary ({})",
                        path, id, s.config_.vocab_size));
      }
    }
    return s;
  }
  if (!fs::exists(path, ec)) return not_found(fmt::format("--model '{}' does not exist", path));
  if (!starts_with_gguf_magic(path)) {
    return invalid_argument(
        fmt::format("'{}' is neither a folder nor a GGUF file (it does not start with 'GGUF'); "
                    "point --model at a Hugging Face model folder or a .gguf file",
                    path));
  }
  s.format_ = ModelFormat::kGguf;
  RLT_ASSIGN_OR_RETURN(s.gguf_, io::GgufFile::open(path));
  RLT_ASSIGN_OR_RETURN(io::GgufModelInfo info, io::read_gguf_model_info(*s.gguf_));
  s.config_ = std::move(info.config);
  s.generation_ = std::move(info.generation);
  s.notes_ = std::move(info.notes);
  return s;
}

std::string ModelSource::format_name() const {
  return format_ == ModelFormat::kGguf ? "gguf" : "hugging face folder";
}

std::string ModelSource::default_name() const {
  fs::path p(path_);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();
  std::string name = p.filename().string();
  if (format_ == ModelFormat::kGguf && name.size() > 5 && name.ends_with(".gguf"))
    name.resize(name.size() - 5);
  return name.empty() ? path_ : name;
}

Result<io::Checkpoint> ModelSource::open_checkpoint(const io::QuantizedTensors& quantized,
                                                    bool deferred) const {
  if (format_ == ModelFormat::kGguf) return io::gguf_checkpoint(gguf_, config_, quantized, deferred);
  return io::Checkpoint::open_dir(path_);
}

bool ModelSource::has_tokenizer() const {
  std::error_code ec;
  if (format_ == ModelFormat::kGguf) return gguf_->find("tokenizer.ggml.model") != nullptr;
  return fs::exists(fs::path(path_) / "tokenizer.json", ec);
}

Result<std::shared_ptr<const tok::Tokenizer>> ModelSource::tokenizer() const {
  if (format_ == ModelFormat::kHuggingFaceFolder) {
    const std::string file = (fs::path(path_) / "tokenizer.json").string();
    auto t = tok::Tokenizer::from_file(file);
    if (!t.ok()) return t.status().with_context(file);
    return t;
  }
  auto vocab = read_gguf_vocab(*gguf_);
  if (!vocab.ok()) return vocab.status();
  auto t = tok::tokenizer_from_gguf(*vocab);
  if (t.ok()) return t;
  const std::string fallback = beside(path_, "tokenizer.json");
  std::error_code ec;
  if (t.status().code() == ErrorCode::kUnimplemented && fs::exists(fallback, ec)) {
    log_warn(fmt::format("{}; using {} instead", t.status().message(), fallback));
    return tok::Tokenizer::from_file(fallback);
  }
  return t.status().with_context(path_);
}

Result<tok::ChatTemplate> ModelSource::chat_template() const {
  if (format_ == ModelFormat::kHuggingFaceFolder) return tok::ChatTemplate::from_model_dir(path_);
  std::optional<std::string> source;
  RLT_RETURN_IF_ERROR(take(gguf_->get_string("tokenizer.chat_template"), &source));
  if (!source)
    return not_found(
        fmt::format("{} has no chat template (no tokenizer.chat_template key)", path_));
  // The special tokens a template may name, as transformers passes them.
  nlohmann::ordered_json specials = nlohmann::ordered_json::object();
  std::optional<std::vector<std::string>> tokens;
  RLT_RETURN_IF_ERROR(take(gguf_->get_string_array("tokenizer.ggml.tokens"), &tokens));
  for (auto [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                           std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
                           std::pair{"tokenizer.ggml.unknown_token_id", "unk_token"},
                           std::pair{"tokenizer.ggml.padding_token_id", "pad_token"}}) {
    std::optional<int64_t> id;
    RLT_RETURN_IF_ERROR(take(gguf_->get_int(key), &id));
    if (id && tokens && *id >= 0 && *id < static_cast<int64_t>(tokens->size()))
      specials[name] = (*tokens)[static_cast<size_t>(*id)];
  }
  auto t = tok::ChatTemplate::from_string(*source, specials);
  if (!t.ok()) return t.status().with_context(path_ + ": tokenizer.chat_template");
  return t;
}

}  // namespace rlt::source
