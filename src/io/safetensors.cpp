#include "io/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace rlt::io {
namespace {

using json = nlohmann::json;

Status header_error(const std::string& file, const std::string& what) {
  return data_loss(fmt::format("{}: invalid safetensors header: {}", file, what));
}

// Parses JSON while rejecting duplicate keys at the top level (nlohmann would keep the last).
Result<json> parse_header_json(const char* begin, const char* end, const std::string& file) {
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(begin, end, cb);
  } catch (const json::exception& e) {
    return header_error(file, fmt::format("not valid JSON ({})", e.what()));
  }
  if (!duplicate.empty())
    return header_error(file, fmt::format("tensor '{}' is listed twice", duplicate));
  if (!header.is_object()) return header_error(file, "the header is not a JSON object");
  return header;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

Result<TensorView> parse_entry(const std::string& name, const json& entry, const uint8_t* data,
                               uint64_t data_size, const std::string& file) {
  auto fail = [&](const std::string& what) {
    return header_error(file, fmt::format("tensor '{}': {}", name, what));
  };
  if (!entry.is_object()) return fail("entry is not an object");
  for (const auto& [key, _] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return fail(fmt::format("unknown field '{}'", key));
  }
  if (!entry.contains("dtype") || !entry["dtype"].is_string())
    return fail("missing string field 'dtype'");
  const auto& dtype_name_str = entry["dtype"].get_ref<const std::string&>();
  auto dtype = dtype_from_name(dtype_name_str);
  if (!dtype) {
    return fail(
        fmt::format("unsupported dtype '{}' (supported: F32, BF16, F16, F64, I64, I32, I16, "
                    "I8, U8, BOOL)",
                    dtype_name_str));
  }
  if (!entry.contains("shape") || !entry["shape"].is_array())
    return fail("missing array field 'shape'");
  TensorView t;
  t.name = name;
  t.dtype = *dtype;
  t.file = file;
  uint64_t numel = 1;
  for (const auto& dim : entry["shape"]) {
    if (!dim.is_number_unsigned()) return fail("shape entries must be non-negative integers");
    uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        !checked_mul(numel, d, &numel))
      return fail("shape overflows 64 bits");
    t.shape.push_back(static_cast<int64_t>(d));
  }
  const auto& offsets = entry.contains("data_offsets") ? entry["data_offsets"] : json();
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    return fail("'data_offsets' must be [begin, end] with non-negative integers");
  uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end) return fail(fmt::format("data_offsets [{}, {}] has begin > end", begin, end));
  if (end > data_size) {
    return fail(
        fmt::format("data_offsets [{}, {}] run past the data region ({} bytes); the file is "
                    "truncated or the header is wrong",
                    begin, end, data_size));
  }
  uint64_t expected_bytes = 0;
  if (!checked_mul(numel, dtype_size(*dtype), &expected_bytes) || expected_bytes != end - begin) {
    return fail(fmt::format("shape {} of {} needs {} bytes but data_offsets [{}, {}] span {}",
                            t.shape_string(), dtype_name_str, expected_bytes, begin, end,
                            end - begin));
  }
  if (begin % dtype_size(*dtype) != 0 ||
      reinterpret_cast<uintptr_t>(data + begin) % dtype_size(*dtype) != 0) {
    return fail(fmt::format("data at offset {} is not aligned to its {}-byte elements", begin,
                            dtype_size(*dtype)));
  }
  t.data = data + begin;
  t.nbytes = static_cast<size_t>(end - begin);
  return t;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  RLT_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  return parse(mapping->data(), mapping->size(), path, mapping);
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                               const std::string& name,
                                               std::shared_ptr<MappedFile> keep_alive) {
  if (size < 8) {
    return header_error(
        name, fmt::format("file is {} bytes, shorter than the 8-byte length prefix", size));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return header_error(name, fmt::format("header length {} exceeds the {} byte limit", header_len,
                                          kMaxSafetensorsHeaderBytes));
  }
  if (header_len > size - 8) {
    return header_error(name, fmt::format("header length {} runs past the end of the {}-byte file",
                                          header_len, size));
  }
  const char* hbegin = reinterpret_cast<const char*>(bytes + 8);
  RLT_ASSIGN_OR_RETURN(json header, parse_header_json(hbegin, hbegin + header_len, name));

  SafetensorsFile file;
  file.path_ = name;
  file.mapping_ = std::move(keep_alive);
  const uint8_t* data = bytes + 8 + header_len;
  uint64_t data_size = size - 8 - header_len;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return header_error(name, "'__metadata__' must be an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return header_error(name,
                              fmt::format("'__metadata__' value for '{}' is not a string", mk));
        }
        file.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    RLT_ASSIGN_OR_RETURN(TensorView t, parse_entry(key, value, data, data_size, name));
    t.mapping = file.mapping_;
    file.tensors_.push_back(std::move(t));
  }
  // The data region must be tiled exactly: no overlaps, no holes, no trailing bytes. This is the
  // reference implementation's rule, and it catches headers that disagree with the data.
  std::vector<const TensorView*> order;
  for (const auto& t : file.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    return a->data < b->data || (a->data == b->data && a->nbytes < b->nbytes);
  });
  const uint8_t* cursor = data;
  for (const TensorView* t : order) {
    if (t->data < cursor) {
      return header_error(
          name, fmt::format("tensor '{}' (bytes {}..{}) overlaps the tensor before it", t->name,
                            t->data - data, t->data - data + t->nbytes));
    }
    if (t->data > cursor) {
      return header_error(name, fmt::format("unused bytes {}..{} before tensor '{}'", cursor - data,
                                            t->data - data, t->name));
    }
    cursor = t->data + t->nbytes;
  }
  if (cursor != data + data_size) {
    return header_error(
        name, fmt::format("{} trailing bytes after the last tensor", data + data_size - cursor));
  }
  return file;
}

Result<Checkpoint> Checkpoint::open_file(const std::string& path) {
  RLT_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(path));
  Checkpoint ckpt;
  RLT_RETURN_IF_ERROR(ckpt.add_file(std::move(file)));
  return ckpt;
}

Result<Checkpoint> Checkpoint::from_views(std::vector<TensorView> views,
                                          std::vector<std::shared_ptr<const void>> owners,
                                          std::vector<std::string> files) {
  Checkpoint ckpt;
  for (TensorView& t : views) {
    const std::string name = t.name;
    if (!ckpt.tensors_.emplace(name, std::move(t)).second)
      return data_loss(fmt::format("tensor '{}' is defined twice", name));
  }
  ckpt.owners_ = std::move(owners);
  ckpt.files_ = std::move(files);
  return ckpt;
}

Status Checkpoint::add_file(SafetensorsFile file) {
  auto shard = std::make_shared<const SafetensorsFile>(std::move(file));
  for (const auto& t : shard->tensors()) {
    auto [it, inserted] = tensors_.emplace(t.name, t);
    if (!inserted) {
      return data_loss(fmt::format("tensor '{}' appears in both '{}' and '{}'", t.name,
                                   it->second.file, t.file));
    }
  }
  files_.push_back(shard->path());
  shards_.push_back(std::move(shard));
  return {};
}

Result<Checkpoint> Checkpoint::open_index(const std::string& index_path) {
  std::ifstream in(index_path);
  if (!in) return io_error(fmt::format("cannot open '{}'", index_path));
  std::stringstream ss;
  ss << in.rdbuf();
  json index;
  try {
    index = json::parse(ss.str());
  } catch (const json::exception& e) {
    return data_loss(fmt::format("{}: not valid JSON ({})", index_path, e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return data_loss(fmt::format("{}: missing object 'weight_map'", index_path));
  }
  const auto dir = std::filesystem::path(index_path).parent_path();
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> shard_names;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) {
      return data_loss(
          fmt::format("{}: weight_map entry for '{}' is not a file name", index_path, tensor));
    }
    const auto& s = shard.get_ref<const std::string&>();
    if (s.empty() || s.find('/') != std::string::npos || s == "..") {
      return data_loss(
          fmt::format("{}: weight_map entry for '{}' names '{}', which is not a file in "
                      "the checkpoint directory",
                      index_path, tensor, s));
    }
    weight_map[tensor] = s;
    if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end())
      shard_names.push_back(s);
  }
  std::sort(shard_names.begin(), shard_names.end());
  Checkpoint ckpt;
  for (const auto& s : shard_names) {
    RLT_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open((dir / s).string()));
    RLT_RETURN_IF_ERROR(ckpt.add_file(std::move(file)));
  }
  for (const auto& [tensor, shard] : weight_map) {
    auto it = ckpt.tensors_.find(tensor);
    if (it == ckpt.tensors_.end()) {
      return data_loss(
          fmt::format("{}: tensor '{}' is mapped to '{}' but that file does not contain it",
                      index_path, tensor, shard));
    }
    if (std::filesystem::path(it->second.file).filename() != shard) {
      return data_loss(fmt::format("{}: tensor '{}' is mapped to '{}' but found in '{}'",
                                   index_path, tensor, shard, it->second.file));
    }
  }
  for (const auto& [name, t] : ckpt.tensors_) {
    if (!weight_map.count(name)) {
      return data_loss(fmt::format("{}: tensor '{}' in '{}' is not listed in the index", index_path,
                                   name, t.file));
    }
  }
  return ckpt;
}

Result<Checkpoint> Checkpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found(fmt::format("'{}' is not a directory", dir));
  auto index = fs::path(dir) / "model.safetensors.index.json";
  auto single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index, ec)) return open_index(index.string());
  if (fs::exists(single, ec)) return open_file(single.string());
  return not_found(
      fmt::format("'{}' holds neither model.safetensors nor model.safetensors.index.json; "
                  "point --model at a Hugging Face model folder",
                  dir));
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void Checkpoint::release(const std::string& name, bool keep_converted) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return;
  TensorView& t = it->second;
  if (t.owner) {
    if (keep_converted) return;
    t.owner.reset();
    t.data = nullptr;
    t.convert = nullptr;  // gone for good, not converted again
  } else if (t.mapping) {
    t.mapping->release(t.data, t.nbytes);
  }
}

Status Checkpoint::materialize(const std::string& name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return not_found(fmt::format("no tensor '{}'", name));
  TensorView& t = it->second;
  if (t.data != nullptr || !t.convert) return Status::ok_status();
  RLT_ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<uint8_t>> bytes, t.convert());
  if (bytes->size() != t.nbytes) {
    return internal_error(fmt::format("tensor '{}' converted to {} bytes, {} expected", name,
                                      bytes->size(), t.nbytes));
  }
  t.data = bytes->data();
  t.owner = std::move(bytes);
  t.convert = nullptr;
  return Status::ok_status();
}

Status Checkpoint::materialize_all() {
  for (auto& [name, _] : tensors_) RLT_RETURN_IF_ERROR(materialize(name));
  return Status::ok_status();
}

void Checkpoint::release_mappings() const {
  std::set<const MappedFile*> done;
  for (const auto& [_, t] : tensors_)
    if (t.mapping && done.insert(t.mapping.get()).second)
      t.mapping->release(t.mapping->data(), t.mapping->size());
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [_, t] : tensors_) n += t.nbytes;
  return n;
}

Status validate_tensor_set(const Checkpoint& ckpt, const std::vector<ExpectedTensor>& expected) {
  constexpr size_t kMaxListed = 5;
  std::vector<std::string> missing, bad_shape, bad_dtype, unexpected;
  std::set<std::string> expected_names;
  for (const auto& e : expected) {
    expected_names.insert(e.name);
    const TensorView* t = ckpt.find(e.name);
    if (t == nullptr) {
      missing.push_back(e.name);
      continue;
    }
    if (t->shape != e.shape) {
      bad_shape.push_back(fmt::format("'{}' in {} is {} (expected [{}])", e.name, t->file,
                                      t->shape_string(), fmt::join(e.shape, ", ")));
    }
    if (t->quant && e.shape.size() != 2) {
      bad_dtype.push_back(fmt::format("'{}' in {} is {} (vectors must be F32, BF16 or F16)", e.name,
                                      t->file, quant::ggml_type_name(*t->quant)));
    } else if (!t->quant && !is_weight_float(t->dtype)) {
      bad_dtype.push_back(fmt::format("'{}' in {} is {} (expected F32, BF16 or F16)", e.name,
                                      t->file, dtype_name(t->dtype)));
    }
  }
  for (const auto& [name, t] : ckpt.tensors()) {
    if (!expected_names.count(name)) unexpected.push_back(fmt::format("'{}' in {}", name, t.file));
  }
  std::vector<std::string> parts;
  auto add = [&](const char* what, const std::vector<std::string>& items) {
    if (items.empty()) return;
    std::vector<std::string> shown(items.begin(),
                                   items.begin() + std::min(items.size(), kMaxListed));
    std::string more =
        items.size() > kMaxListed ? fmt::format(" and {} more", items.size() - kMaxListed) : "";
    parts.push_back(
        fmt::format("{} {} tensor(s): {}{}", items.size(), what, fmt::join(shown, ", "), more));
  };
  add("missing", missing);
  add("unexpected", unexpected);
  add("wrongly shaped", bad_shape);
  add("wrongly typed", bad_dtype);
  if (parts.empty()) return {};
  return invalid_argument(
      fmt::format("checkpoint does not match the model config: {}", fmt::join(parts, "; ")));
}

std::string quantized_types(const Checkpoint& ckpt) {
  std::map<std::string, size_t> bytes;
  for (const auto& [_, t] : ckpt.tensors())
    if (t.quant) bytes[std::string(quant::ggml_type_name(*t.quant))] += t.nbytes;
  std::vector<std::pair<size_t, std::string>> order;
  for (const auto& [name, n] : bytes) order.emplace_back(n, name);
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (const auto& [_, name] : order) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace rlt::io
