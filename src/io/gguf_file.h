// Reader for GGUF files (llama.cpp's model format, versions 2 and 3) over mmap: the metadata
// key/value pairs, every value type, the tensor infos, and the aligned data section. Everything
// is validated at open, so a truncated or malformed file is an error that names the offset and
// the key or tensor, never a crash or a read out of bounds. Tensor data is used in place.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 key/value count; the pairs
// (u64-length key string, u32 value type, value); the tensor infos (name, u32 n_dims, u64 ne[]
// with ne[0] the contiguous dimension, u32 ggml type, u64 offset into the data section); padding
// to `general.alignment` (default 32); the data section.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mapped_file.h"
#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::io {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view gguf_type_name(GgufType type);

// One metadata value. Integers keep their exact value in `i64` (signed types, and unsigned ones
// up to 2^63) or `u64`; floats in `f64`; arrays their elements (all of `elem_type`).
//
// Arrays read from a file keep their elements in the file's bytes (`raw`: `count` elements in
// `raw_bytes` bytes, validated when the file was parsed) and decode them on request: held as
// values, a tokenizer's 100,000 strings took 30 MB for the life of the model. Arrays built in
// memory, and arrays of arrays, hold `elems`.
struct GgufValue {
  GgufType type = GgufType::kU8;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  double f64 = 0.0;
  bool boolean = false;
  std::string str;
  GgufType elem_type = GgufType::kU8;
  std::vector<GgufValue> elems;
  const uint8_t* raw = nullptr;
  size_t raw_bytes = 0;
  uint64_t count = 0;

  // The number of elements of an array.
  uint64_t size() const { return raw != nullptr ? count : elems.size(); }
  // The elements of an array, decoded from `raw` when the array is read from a file.
  std::vector<GgufValue> elements() const;
  bool is_integer() const;
  bool is_float() const { return type == GgufType::kF32 || type == GgufType::kF64; }
  std::string describe() const;  // "u32 7", "string 'llama'", "array of 49152 string"
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the contiguous (row) dimension: numpy shape reversed
  quant::GgmlType type = quant::GgmlType::kF32;
  uint64_t offset = 0;  // into the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  int64_t row_elems() const { return ne.empty() ? 1 : ne[0]; }
  int64_t rows() const { return numel() / row_elems(); }
  // As a PyTorch / safetensors shape: [ne[n-1], ..., ne[0]].
  std::vector<int64_t> shape() const;
  std::string shape_string() const;
};

class GgufFile {
 public:
  static Result<std::shared_ptr<const GgufFile>> open(const std::string& path);
  // The same validation over bytes in memory (tests, fuzzing). `keep_alive` may be null; the bytes
  // must then outlive the file (tensor data and array values point into them).
  static Result<std::shared_ptr<const GgufFile>> parse(
      const uint8_t* bytes, size_t size, const std::string& name,
      std::shared_ptr<MappedFile> keep_alive = nullptr);

  const std::string& path() const { return path_; }
  // The file mapping the tensors point into (null for bytes parsed from memory).
  const std::shared_ptr<MappedFile>& mapping() const { return mapping_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed metadata reads; an absent key gives nullopt, a value of another type an error naming
  // the key, the expected and the found type.
  Result<std::optional<std::string>> get_string(std::string_view key) const;
  Result<std::optional<int64_t>> get_int(std::string_view key) const;   // any integer type
  Result<std::optional<double>> get_float(std::string_view key) const;  // floats and integers
  Result<std::optional<bool>> get_bool(std::string_view key) const;
  Result<std::optional<std::vector<std::string>>> get_string_array(std::string_view key) const;
  Result<std::optional<std::vector<int64_t>>> get_int_array(std::string_view key) const;
  Result<std::optional<std::vector<double>>> get_float_array(std::string_view key) const;

 private:
  std::string path_;
  std::shared_ptr<MappedFile> mapping_;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace rlt::io
