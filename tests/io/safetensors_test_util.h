// Builds safetensors bytes by hand so each malformed case can be written exactly.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace rlt::io::testing {

// 8-byte length + header (padded with spaces to a multiple of 8 unless `pad` is false) + data.
inline std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data,
                                      bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  // Sized once and filled with memcpy: g++ 12 warns falsely (-Warray-bounds) on vector::insert here.
  std::vector<uint8_t> out(8 + h.size() + data.size());
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
  return out;
}

inline std::vector<uint8_t> f32_bytes(std::vector<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace rlt::io::testing
