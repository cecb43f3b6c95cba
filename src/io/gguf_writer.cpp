#include "io/gguf_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace rlt::io {
namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8:
      put<uint8_t>(out, static_cast<uint8_t>(v.u64));
      break;
    case GgufType::kI8:
      put<int8_t>(out, static_cast<int8_t>(v.i64));
      break;
    case GgufType::kU16:
      put<uint16_t>(out, static_cast<uint16_t>(v.u64));
      break;
    case GgufType::kI16:
      put<int16_t>(out, static_cast<int16_t>(v.i64));
      break;
    case GgufType::kU32:
      put<uint32_t>(out, static_cast<uint32_t>(v.u64));
      break;
    case GgufType::kI32:
      put<int32_t>(out, static_cast<int32_t>(v.i64));
      break;
    case GgufType::kU64:
      put<uint64_t>(out, v.u64);
      break;
    case GgufType::kI64:
      put<int64_t>(out, v.i64);
      break;
    case GgufType::kF32:
      put<float>(out, static_cast<float>(v.f64));
      break;
    case GgufType::kF64:
      put<double>(out, v.f64);
      break;
    case GgufType::kBool:
      put<uint8_t>(out, v.boolean ? 1 : 0);
      break;
    case GgufType::kString:
      put_string(out, v.str);
      break;
    case GgufType::kArray:
      put<uint32_t>(out, static_cast<uint32_t>(v.elem_type));
      put<uint64_t>(out, v.size());
      if (v.raw != nullptr) {  // elements as read from a file: already serialized
        out.insert(out.end(), v.raw, v.raw + v.raw_bytes);
      } else {
        for (const GgufValue& e : v.elems) put_value(out, e);
      }
      break;
  }
}

void pad_to(std::vector<uint8_t>& out, size_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

GgufValue scalar(GgufType t) {
  GgufValue v;
  v.type = t;
  return v;
}

}  // namespace

void GgufWriter::add(const std::string& key, GgufValue value) {
  for (auto& [k, v] : kvs_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kvs_.emplace_back(key, std::move(value));
}

void GgufWriter::add_string(const std::string& key, const std::string& s) {
  GgufValue v = scalar(GgufType::kString);
  v.str = s;
  add(key, std::move(v));
}
void GgufWriter::add_u32(const std::string& key, uint32_t x) {
  GgufValue v = scalar(GgufType::kU32);
  v.u64 = x;
  v.i64 = x;
  add(key, std::move(v));
}
void GgufWriter::add_i32(const std::string& key, int32_t x) {
  GgufValue v = scalar(GgufType::kI32);
  v.i64 = x;
  add(key, std::move(v));
}
void GgufWriter::add_f32(const std::string& key, float x) {
  GgufValue v = scalar(GgufType::kF32);
  v.f64 = x;
  add(key, std::move(v));
}
void GgufWriter::add_bool(const std::string& key, bool x) {
  GgufValue v = scalar(GgufType::kBool);
  v.boolean = x;
  add(key, std::move(v));
}
void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& xs) {
  GgufValue v = scalar(GgufType::kArray);
  v.elem_type = GgufType::kString;
  for (const auto& x : xs) {
    GgufValue e = scalar(GgufType::kString);
    e.str = x;
    v.elems.push_back(std::move(e));
  }
  add(key, std::move(v));
}
void GgufWriter::add_i32_array(const std::string& key, const std::vector<int32_t>& xs) {
  GgufValue v = scalar(GgufType::kArray);
  v.elem_type = GgufType::kI32;
  for (int32_t x : xs) {
    GgufValue e = scalar(GgufType::kI32);
    e.i64 = x;
    v.elems.push_back(e);
  }
  add(key, std::move(v));
}
void GgufWriter::add_f32_array(const std::string& key, const std::vector<float>& xs) {
  GgufValue v = scalar(GgufType::kArray);
  v.elem_type = GgufType::kF32;
  for (float x : xs) {
    GgufValue e = scalar(GgufType::kF32);
    e.f64 = x;
    v.elems.push_back(e);
  }
  add(key, std::move(v));
}

Status GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne,
                              quant::GgmlType type, std::vector<uint8_t> bytes) {
  int64_t rows = 1;
  for (size_t i = 1; i < ne.size(); ++i) rows *= ne[i];
  auto row_bytes = ne.empty() ? std::nullopt : quant::ggml_row_bytes(type, ne[0]);
  if (!row_bytes || static_cast<size_t>(*row_bytes * rows) != bytes.size()) {
    return invalid_argument(
        fmt::format("tensor '{}': {} bytes do not make a {} tensor of that shape", name,
                    bytes.size(), quant::ggml_type_name(type)));
  }
  tensors_.push_back({name, std::move(ne), type, std::move(bytes)});
  return {};
}

std::vector<uint8_t> GgufWriter::serialize() const {
  // A reader lays the data out at general.alignment (32 when absent): say so when it differs.
  if (alignment_ != 32 && std::none_of(kvs_.begin(), kvs_.end(), [](const auto& kv) {
        return kv.first == "general.alignment";
      })) {
    GgufWriter copy = *this;
    copy.add_u32("general.alignment", alignment_);
    return copy.serialize();
  }
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kvs_.size());
  for (const auto& [key, v] : kvs_) {
    put_string(out, key);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset = (offset + t.bytes.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  pad_to(out, alignment_);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    pad_to(out, alignment_);
  }
  return out;
}

Status GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> bytes = serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return io_error(fmt::format("cannot create '{}'", path));
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) return io_error(fmt::format("cannot write '{}'", path));
  return {};
}

}  // namespace rlt::io
