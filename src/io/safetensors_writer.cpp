#include "io/safetensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace rlt::io {

Status write_safetensors(const std::string& path, std::vector<TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata) {
  // Wider dtypes first, then by name (the reference writer's order): every tensor then starts at a
  // multiple of its element size, given the 8-byte-aligned header.
  std::sort(tensors.begin(), tensors.end(), [](const TensorToWrite& a, const TensorToWrite& b) {
    if (dtype_size(a.dtype) != dtype_size(b.dtype)) return dtype_size(a.dtype) > dtype_size(b.dtype);
    return a.name < b.name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
    if (numel * dtype_size(t.dtype) != t.bytes.size()) {
      return invalid_argument(fmt::format("tensor '{}': shape needs {} bytes, {} given", t.name,
                                          numel * dtype_size(t.dtype), t.bytes.size()));
    }
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return io_error(fmt::format("cannot create '{}'", path));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (const auto& t : tensors) {
    if (!ok) break;
    ok = t.bytes.empty() || std::fwrite(t.bytes.data(), 1, t.bytes.size(), f) == t.bytes.size();
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return io_error(fmt::format("failed writing '{}' (disk full?)", path));
  return {};
}

}  // namespace rlt::io
