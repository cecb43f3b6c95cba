// Writes GGUF files (version 3, little-endian): metadata of every value type and tensors given as
// raw bytes of their GGML type. Used by the tests (fixtures and the mutation corpus) and by
// conversions that emit GGUF.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "quant/ggml_type.h"
#include "rlt/status.h"

namespace rlt::io {

class GgufWriter {
 public:
  // `alignment`: a power of two (written as general.alignment when not 32).
  explicit GgufWriter(uint32_t alignment = 32) : alignment_(alignment == 0 ? 32 : alignment) {}

  // Adds a key, or replaces its value when the key is there already (keys stay in first-added
  // order).
  void add(const std::string& key, GgufValue value);
  void add_string(const std::string& key, const std::string& v);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void add_f32_array(const std::string& key, const std::vector<float>& v);
  // `ne` in GGUF order (ne[0] contiguous); `bytes` must hold exactly the tensor's data.
  Status add_tensor(const std::string& name, std::vector<int64_t> ne, quant::GgmlType type,
                    std::vector<uint8_t> bytes);

  std::vector<uint8_t> serialize() const;
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    quant::GgmlType type;
    std::vector<uint8_t> bytes;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace rlt::io
