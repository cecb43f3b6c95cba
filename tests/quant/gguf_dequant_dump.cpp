// Test helper for the dequantization oracle (test_dequant_oracle.py): dequantizes every tensor of
// a GGUF file with rlt's quant module and prints one JSON line per tensor with a checksum of the
// f32 bits; with --dump DIR it also writes each tensor's f32 values to DIR/<index>.f32.
//
// checksum = sum over i of bits[i] * (i * 2654435761 + 1), modulo 2^64: cheap to compute in numpy
// as well, and any changed value changes it.
//
// With --quantize TYPE IN.f32 ROW OUT it instead quantizes the f32 values of IN, ROW values per
// row, into TYPE's blocks (Q8_0, Q4_K, Q6_K) and writes the bytes to OUT.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace {

int quantize_file(const std::string& type_name, const std::string& in, int64_t row,
                  const std::string& out) {
  std::optional<rlt::quant::GgmlType> type;
  for (auto t :
       {rlt::quant::GgmlType::kQ8_0, rlt::quant::GgmlType::kQ4_K, rlt::quant::GgmlType::kQ6_K})
    if (rlt::quant::ggml_type_name(t) == type_name) type = t;
  std::ifstream f(in, std::ios::binary | std::ios::ate);
  if (!type || !f || row <= 0) return 2;
  std::vector<float> values(static_cast<size_t>(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  const int64_t rows = static_cast<int64_t>(values.size()) / row;
  const int64_t row_bytes = rlt::quant::ggml_row_bytes(*type, row).value_or(0);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row_bytes));
  for (int64_t r = 0; r < rows; ++r) {
    auto st =
        rlt::quant::quantize_row(*type, values.data() + r * row, row, bytes.data() + r * row_bytes);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
  }
  std::ofstream(out, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--quantize")
    return quantize_file(argv[2], argv[3], std::stoll(argv[4]), argv[5]);
  if (argc != 2 && !(argc == 4 && std::string(argv[2]) == "--dump")) {
    std::fprintf(stderr, "usage: %s FILE.gguf [--dump DIR]\n", argv[0]);
    return 2;
  }
  auto file = rlt::io::GgufFile::open(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().to_string().c_str());
    return 1;
  }
  size_t index = 0;
  for (const auto& t : (*file)->tensors()) {
    std::vector<float> values(static_cast<size_t>(t.numel()));
    const int64_t row = t.row_elems();
    const size_t row_bytes = t.nbytes / static_cast<size_t>(t.rows());
    for (int64_t r = 0; r < t.rows(); ++r) {
      auto st = rlt::quant::dequantize_row(t.type, t.data + static_cast<size_t>(r) * row_bytes, row,
                                           values.data() + r * row);
      if (!st.ok()) {
        std::fprintf(stderr, "%s: %s\n", t.name.c_str(), st.to_string().c_str());
        return 1;
      }
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      sum += uint64_t{bits} * (uint64_t{i} * 2654435761u + 1u);
    }
    std::printf("%s\n",
                fmt::format(R"({{"index": {}, "name": "{}", "type": "{}", "checksum": {}}})", index,
                            t.name, rlt::quant::ggml_type_name(t.type), sum)
                    .c_str());
    if (argc == 4) {
      std::ofstream out(fmt::format("{}/{}.f32", argv[3], index), std::ios::binary);
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * 4));
    }
    ++index;
  }
  return 0;
}
