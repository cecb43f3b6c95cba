// Reader for Hugging Face safetensors checkpoints over mmap: one file, or a sharded set described
// by model.safetensors.index.json. Tensor data is used in place; nothing is copied or widened.
//
// File format: u64 little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data region; offsets are relative to the data region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/mapped_file.h"
#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::io {

// The largest header rlt accepts (the reference Rust implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into `mapping`, into `owner`, or into caller-held memory
  size_t nbytes = 0;
  // The file mapping `data` points into (null for bytes parsed from memory).
  std::shared_ptr<const MappedFile> mapping;
  // The buffer `data` points into when the tensor was converted at load (dequantized, quantized,
  // rows reordered): it lives as long as some view holds it.
  std::shared_ptr<const void> owner;
  // A conversion deferred until the tensor is used (data null until Checkpoint::materialize):
  // loading converts layer by layer as it packs, never the whole model at once.
  std::function<Result<std::shared_ptr<const std::vector<uint8_t>>>()> convert;
  std::string file;  // the file holding the tensor, for error messages
  // Set for a GGUF matrix kept in its GGML block type (rows of blocks; dtype is then kU8).
  std::optional<quant::GgmlType> quant = std::nullopt;

  int64_t numel() const;
  std::string shape_string() const;  // "[2048, 5632]"
};

// One .safetensors file, validated completely at open.
class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Same validation over bytes already in memory (tests, fuzzing). `keep_alive` may be null.
  static Result<SafetensorsFile> parse(const uint8_t* bytes, size_t size, const std::string& name,
                                       std::shared_ptr<MappedFile> keep_alive);

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> mapping_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a checkpoint directory, single-file or sharded.
class Checkpoint {
 public:
  // `dir` holds model.safetensors or model.safetensors.index.json (+ the shards it names).
  static Result<Checkpoint> open_dir(const std::string& dir);
  // A sharded checkpoint from its index file.
  static Result<Checkpoint> open_index(const std::string& index_path);
  static Result<Checkpoint> open_file(const std::string& path);
  // Tensors that live elsewhere (a GGUF mapping, buffers converted at load): `owners` keep their
  // bytes alive as long as the checkpoint. Names must be unique.
  static Result<Checkpoint> from_views(std::vector<TensorView> views,
                                       std::vector<std::shared_ptr<const void>> owners,
                                       std::vector<std::string> files);

  const TensorView* find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  size_t total_bytes() const;
  // Gives back the memory of a tensor whose bytes have been copied out (packed for the kernels):
  // file-mapped bytes leave the resident set and stay readable; bytes converted at load are freed
  // (the view keeps its name, shape and size, with null data) unless `keep_converted`.
  void release(const std::string& name, bool keep_converted = false);
  // Runs a tensor's deferred conversion (TensorView::convert), if it has one not yet run.
  Status materialize(const std::string& name);
  Status materialize_all();
  // Releases every file mapping the tensors point into, whole (their bytes stay readable). After
  // packing, so that pages brought back in between (the kernel maps whole large folios of the
  // page cache on a fault) do not stay resident.
  void release_mappings() const;
  const std::vector<std::string>& files() const { return files_; }

 private:
  Status add_file(SafetensorsFile file);
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::vector<std::shared_ptr<const void>> owners_;
  std::map<std::string, TensorView> tensors_;
  std::vector<std::string> files_;
};

// The GGML types of the tensors kept in blocks (TensorView::quant), most bytes first:
// "Q4_1, Q8_0"; empty when none are.
std::string quantized_types(const Checkpoint& ckpt);

// The tensor set a model expects: name, dtype class and exact shape.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

// Checks that the checkpoint holds exactly `expected` (no missing, no unexpected tensors), every
// shape matches, and every dtype is a float type rlt computes with (F32, BF16, F16) or a kept GGML
// block type (TensorView::quant, matrices only). Reports all
// problems at once, up to a few of each kind, with file names.
Status validate_tensor_set(const Checkpoint& ckpt, const std::vector<ExpectedTensor>& expected);

}  // namespace rlt::io
