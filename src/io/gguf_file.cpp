#include "io/gguf_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace rlt::io {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;  // arrays of arrays (none seen in the wild beyond one)
constexpr uint64_t kMaxStringBytes = 1ull << 30;
// Metadata values are held as GgufValue (~100 bytes each) while the file stores an element in 1
// to 12 bytes: counts are capped so a lying header cannot demand gigabytes. Real files stay far
// below (a 256k vocabulary with scores, types and merges is ~1M elements; ~1,000 tensors).
constexpr uint64_t kMaxArrayElements = 1ull << 22;
constexpr uint64_t kMaxMetadataElements = 1ull << 23;
constexpr uint64_t kMaxTensors = 1ull << 16;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0)
      n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      n = 3, cp = c & 0x07;
    else
      return false;
    if (i + n >= s.size()) return false;  // the sequence needs bytes i + 1 .. i + n
    for (size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
      return 8;  // at least its length
    case GgufType::kArray:
      return 12;  // at least its element type and count
  }
  return 1;
}

bool known_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::kF64);
}

// A bounds-checked cursor over the file; every failure names the offset it happened at.
class Cursor {
 public:
  Cursor(const uint8_t* bytes, size_t size, const std::string& file)
      : bytes_(bytes), size_(size), file_(file) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  Status error(size_t at, const std::string& what) const {
    return data_loss(fmt::format("{}: invalid GGUF at offset {}: {}", file_, at, what));
  }

  template <typename T>
  Status read(T* out, std::string_view what) {
    if (remaining() < sizeof(T))
      return error(pos_, fmt::format("the file ends inside {} (truncated?)", what));
    std::memcpy(out, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string* out, std::string_view what) {
    const size_t at = pos_;
    uint64_t len = 0;
    RLT_RETURN_IF_ERROR(read(&len, what));
    if (len > kMaxStringBytes)
      return error(at, fmt::format("{} claims {} bytes, more than the {} rlt accepts", what, len,
                                   kMaxStringBytes));
    if (len > remaining())
      return error(at, fmt::format("{} claims {} bytes but {} remain", what, len, remaining()));
    out->assign(reinterpret_cast<const char*>(bytes_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return {};
  }

  // Keys and tensor names must be UTF-8 (they are matched and printed); values may hold any
  // bytes, as llama.cpp allows (a vocabulary of raw-byte tokens).
  Status read_name(std::string* out, std::string_view what) {
    const size_t at = pos_;
    RLT_RETURN_IF_ERROR(read_string(out, what));
    if (!valid_utf8(*out)) return error(at, fmt::format("{} is not valid UTF-8", what));
    return {};
  }

  Status read_value(GgufType type, GgufValue* v, const std::string& what, int depth) {
    v->type = type;
    const size_t at = pos_;
    switch (type) {
      case GgufType::kU8: {
        uint8_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_unsigned(v, x);
        return {};
      }
      case GgufType::kU16: {
        uint16_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_unsigned(v, x);
        return {};
      }
      case GgufType::kU32: {
        uint32_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_unsigned(v, x);
        return {};
      }
      case GgufType::kU64: {
        uint64_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_unsigned(v, x);
        return {};
      }
      case GgufType::kI8: {
        int8_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_signed(v, x);
        return {};
      }
      case GgufType::kI16: {
        int16_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_signed(v, x);
        return {};
      }
      case GgufType::kI32: {
        int32_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_signed(v, x);
        return {};
      }
      case GgufType::kI64: {
        int64_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        set_signed(v, x);
        return {};
      }
      case GgufType::kF32: {
        float x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        v->f64 = x;
        return {};
      }
      case GgufType::kF64: {
        double x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        v->f64 = x;
        return {};
      }
      case GgufType::kBool: {
        uint8_t x = 0;
        RLT_RETURN_IF_ERROR(read(&x, what));
        if (x > 1) return error(at, fmt::format("{} is a bool stored as {}, not 0 or 1", what, x));
        v->boolean = x == 1;
        return {};
      }
      case GgufType::kString:
        return read_string(&v->str, what);
      case GgufType::kArray: {
        if (depth >= kMaxArrayDepth)
          return error(at, fmt::format("{} nests arrays deeper than {}", what, kMaxArrayDepth));
        uint32_t elem = 0;
        uint64_t count = 0;
        RLT_RETURN_IF_ERROR(read(&elem, what + " (array element type)"));
        if (!known_type(elem))
          return error(at, fmt::format("{} is an array of unknown value type {}", what, elem));
        RLT_RETURN_IF_ERROR(read(&count, what + " (array length)"));
        v->elem_type = static_cast<GgufType>(elem);
        if (count > remaining() / scalar_size(v->elem_type)) {
          return error(at, fmt::format("{} claims {} elements of {} but only {} bytes remain", what,
                                       count, gguf_type_name(v->elem_type), remaining()));
        }
        elements_ += count;
        if (count > kMaxArrayElements || elements_ > kMaxMetadataElements) {
          return error(
              at,
              fmt::format("{} claims {} elements; rlt accepts up to {} per array and {} in all the "
                          "metadata",
                          what, count, kMaxArrayElements, kMaxMetadataElements));
        }
        if (v->elem_type == GgufType::kArray) {
          v->elems.resize(static_cast<size_t>(count));
          for (uint64_t i = 0; i < count; ++i) {
            // Element names are built only when one fails: arrays hold up to millions of entries.
            Status st =
                read_value(v->elem_type, &v->elems[static_cast<size_t>(i)], what, depth + 1);
            if (!st.ok()) return st.with_context(fmt::format("element {}", i));
          }
          return {};
        }
        // Validated element by element, kept as the file's bytes (GgufValue::raw).
        const size_t start = pos_;
        GgufValue element;
        for (uint64_t i = 0; i < count; ++i) {
          Status st = read_value(v->elem_type, &element, what, depth + 1);
          if (!st.ok()) return st.with_context(fmt::format("element {}", i));
        }
        v->raw = bytes_ + start;
        v->raw_bytes = pos_ - start;
        v->count = count;
        return {};
      }
    }
    return error(at,
                 fmt::format("{} has unknown value type {}", what, static_cast<uint32_t>(type)));
  }

 private:
  static void set_unsigned(GgufValue* v, uint64_t x) {
    v->u64 = x;
    v->i64 = x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? static_cast<int64_t>(x)
                 : -1;
  }
  static void set_signed(GgufValue* v, int64_t x) {
    v->i64 = x;
    v->u64 = x >= 0 ? static_cast<uint64_t>(x) : 0;
  }

  const uint8_t* bytes_;
  size_t size_;
  const std::string& file_;
  size_t pos_ = 0;
  uint64_t elements_ = 0;  // array elements read so far
};

bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0 || (a != 0 && b > std::numeric_limits<int64_t>::max() / a)) return false;
  *out = a * b;
  return true;
}

Status type_error(const std::string& file, std::string_view key, std::string_view expected,
                  const GgufValue& v) {
  return invalid_argument(fmt::format("{}: metadata key '{}' must be {}, but it is {}", file, key,
                                      expected, v.describe()));
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "unknown";
}

std::vector<GgufValue> GgufValue::elements() const {
  if (raw == nullptr) return elems;
  std::vector<GgufValue> out(static_cast<size_t>(count));
  Cursor c(raw, raw_bytes, "");
  for (GgufValue& e : out) (void)c.read_value(elem_type, &e, "", 1);  // validated at parse
  return out;
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

std::string GgufValue::describe() const {
  if (type == GgufType::kArray)
    return fmt::format("an array of {} {}", size(), gguf_type_name(elem_type));
  if (type == GgufType::kString) return fmt::format("the string '{}'", str.substr(0, 80));
  if (type == GgufType::kBool) return fmt::format("the bool {}", boolean);
  if (is_float()) return fmt::format("the {} {}", gguf_type_name(type), f64);
  if (type == GgufType::kU64) return fmt::format("the u64 {}", u64);
  return fmt::format("the {} {}", gguf_type_name(type), i64);
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensor::shape() const {
  return {ne.rbegin(), ne.rend()};
}

std::string GgufTensor::shape_string() const {
  return fmt::format("[{}]", fmt::join(shape(), ", "));
}

Result<std::shared_ptr<const GgufFile>> GgufFile::open(const std::string& path) {
  RLT_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  return parse(mapping->data(), mapping->size(), path, mapping);
}

Result<std::shared_ptr<const GgufFile>> GgufFile::parse(const uint8_t* bytes, size_t size,
                                                        const std::string& name,
                                                        std::shared_ptr<MappedFile> keep_alive) {
  auto f = std::make_shared<GgufFile>();
  f->path_ = name;
  f->mapping_ = std::move(keep_alive);
  f->size_ = size;
  Cursor c(bytes, size, f->path_);
  uint32_t magic = 0;
  RLT_RETURN_IF_ERROR(c.read(&magic, "the magic number"));
  if (magic != kMagic) {
    return c.error(
        0, fmt::format(
               "the file does not start with 'GGUF' (found bytes {:02x} {:02x} {:02x} {:02x}); "
               "it is not a GGUF file",
               magic & 0xFF, (magic >> 8) & 0xFF, (magic >> 16) & 0xFF, magic >> 24));
  }
  RLT_RETURN_IF_ERROR(c.read(&f->version_, "the version"));
  if ((f->version_ & 0xFFFF) == 0 && f->version_ != 0)
    return unimplemented(
        fmt::format("{}: a big-endian GGUF file; rlt reads little-endian GGUF only", name));
  if (f->version_ == 1)
    return unimplemented(
        fmt::format("{}: GGUF version 1 is obsolete; convert the model again with a current "
                    "llama.cpp (versions 2 and 3 are read)",
                    name));
  if (f->version_ != 2 && f->version_ != 3)
    return unimplemented(
        fmt::format("{}: GGUF version {} is not one rlt reads (2, 3)", name, f->version_));
  uint64_t tensor_count = 0, kv_count = 0;
  RLT_RETURN_IF_ERROR(c.read(&tensor_count, "the tensor count"));
  RLT_RETURN_IF_ERROR(c.read(&kv_count, "the metadata count"));
  // Each pair takes at least 13 bytes and each tensor info at least 32: counts past that are lies.
  if (kv_count > c.remaining() / 13)
    return c.error(16, fmt::format("the metadata count {} cannot fit in the {} bytes that remain",
                                   kv_count, c.remaining()));
  if (tensor_count > kMaxTensors)
    return c.error(8, fmt::format("the tensor count {} is more than the {} rlt accepts",
                                  tensor_count, kMaxTensors));
  if (tensor_count > c.remaining() / 32)
    return c.error(8, fmt::format("the tensor count {} cannot fit in the {} bytes that remain",
                                  tensor_count, c.remaining()));

  for (uint64_t i = 0; i < kv_count; ++i) {
    const size_t at = c.pos();
    std::string key;
    RLT_RETURN_IF_ERROR(c.read_name(&key, fmt::format("the key of metadata entry {}", i)));
    if (key.empty()) return c.error(at, fmt::format("metadata entry {} has an empty key", i));
    uint32_t type = 0;
    RLT_RETURN_IF_ERROR(c.read(&type, fmt::format("the value type of '{}'", key)));
    if (!known_type(type))
      return c.error(at, fmt::format("metadata key '{}' has unknown value type {}", key, type));
    GgufValue v;
    RLT_RETURN_IF_ERROR(
        c.read_value(static_cast<GgufType>(type), &v, fmt::format("the value of '{}'", key), 0));
    if (f->metadata_.count(key))
      return c.error(at, fmt::format("metadata key '{}' appears twice", key));
    f->metadata_.emplace(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f->find("general.alignment")) {
    if (a->type != GgufType::kU32 || a->u64 == 0 || (a->u64 & (a->u64 - 1)) != 0 ||
        a->u64 > (1u << 20))
      return invalid_argument(
          fmt::format("{}: general.alignment must be a u32 power of two up to 2^20, but it is {}",
                      name, a->describe()));
    f->alignment_ = static_cast<uint32_t>(a->u64);
  } else {
    f->alignment_ = kDefaultAlignment;
  }

  f->tensors_.resize(static_cast<size_t>(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor& t = f->tensors_[static_cast<size_t>(i)];
    const size_t at = c.pos();
    RLT_RETURN_IF_ERROR(c.read_name(&t.name, fmt::format("the name of tensor {}", i)));
    const std::string what = fmt::format("tensor {} ('{}')", i, t.name);
    if (t.name.empty()) return c.error(at, fmt::format("tensor {} has an empty name", i));
    uint32_t n_dims = 0;
    RLT_RETURN_IF_ERROR(c.read(&n_dims, what + ": its dimension count"));
    if (n_dims < 1 || n_dims > kMaxDims)
      return c.error(at,
                     fmt::format("{} has {} dimensions (1 to {} allowed)", what, n_dims, kMaxDims));
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      RLT_RETURN_IF_ERROR(c.read(&ne, what + ": its shape"));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          !checked_mul(numel, static_cast<int64_t>(ne), &numel))
        return c.error(
            at, fmt::format("{} has dimension {} = {}, which is empty or overflows", what, d, ne));
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    uint32_t type = 0;
    RLT_RETURN_IF_ERROR(c.read(&type, what + ": its type"));
    auto info = quant::ggml_type_info(type);
    if (!info) return c.error(at, fmt::format("{} has unknown GGML type {}", what, type));
    t.type = info->type;
    RLT_RETURN_IF_ERROR(c.read(&t.offset, what + ": its offset"));
    auto row_bytes = quant::ggml_row_bytes(t.type, t.ne[0]);
    int64_t nbytes = 0;
    if (t.ne[0] % info->block_elems != 0) {
      return c.error(
          at,
          fmt::format("{} of type {} has rows of {} values, not a multiple of its {}-value blocks",
                      what, info->name, t.ne[0], info->block_elems));
    }
    if (!row_bytes)
      return c.error(at, fmt::format("{} is too large ({} values per row)", what, t.ne[0]));
    if (!checked_mul(*row_bytes, numel / t.ne[0], &nbytes))
      return c.error(at, fmt::format("{} is too large ({} values)", what, numel));
    t.nbytes = static_cast<size_t>(nbytes);
    if (t.offset % f->alignment_ != 0)
      return c.error(
          at, fmt::format("{} starts at data offset {}, not a multiple of the alignment {}", what,
                          t.offset, f->alignment_));
    if (!f->tensor_index_.emplace(t.name, static_cast<size_t>(i)).second)
      return c.error(at, fmt::format("tensor '{}' appears twice", t.name));
  }
  const size_t data_start = (c.pos() + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  if (data_start > size && tensor_count > 0)
    return c.error(c.pos(), "the file ends before its data section (truncated?)");
  const uint64_t data_size = size >= data_start ? size - data_start : 0;
  std::vector<const GgufTensor*> by_offset;
  for (GgufTensor& t : f->tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      return data_loss(
          fmt::format("{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file "
                      "({} data bytes); the file is truncated or its header is wrong",
                      name, t.name, t.nbytes, t.offset, data_size));
    }
    t.data = bytes + data_start + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& prev = *by_offset[i - 1];
    if (prev.offset + prev.nbytes > by_offset[i]->offset) {
      return data_loss(fmt::format(
          "{}: tensors '{}' (data offset {}, {} bytes) and '{}' (data offset {}) overlap", name,
          prev.name, prev.offset, prev.nbytes, by_offset[i]->name, by_offset[i]->offset));
    }
  }
  return std::shared_ptr<const GgufFile>(std::move(f));
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

Result<std::optional<std::string>> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::string>();
  if (v->type != GgufType::kString) return type_error(path_, key, "a string", *v);
  return std::optional<std::string>(v->str);
}

Result<std::optional<int64_t>> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<int64_t>();
  if (!v->is_integer() || (v->type == GgufType::kU64 && v->i64 < 0))
    return type_error(path_, key, "an integer", *v);
  return std::optional<int64_t>(v->i64);
}

Result<std::optional<double>> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<double>();
  if (v->is_float()) return std::optional<double>(v->f64);
  if (v->type == GgufType::kU64) return std::optional<double>(static_cast<double>(v->u64));
  if (v->is_integer()) return std::optional<double>(static_cast<double>(v->i64));
  return type_error(path_, key, "a number", *v);
}

Result<std::optional<bool>> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<bool>();
  if (v->type != GgufType::kBool) return type_error(path_, key, "a bool", *v);
  return std::optional<bool>(v->boolean);
}

Result<std::optional<std::vector<std::string>>> GgufFile::get_string_array(
    std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::vector<std::string>>();
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString)
    return type_error(path_, key, "an array of strings", *v);
  std::vector<std::string> out;
  out.reserve(v->size());
  for (GgufValue& e : v->elements()) out.push_back(std::move(e.str));
  return std::optional<std::vector<std::string>>(std::move(out));
}

Result<std::optional<std::vector<int64_t>>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::vector<int64_t>>();
  GgufValue probe;
  probe.type = v->elem_type;
  if (v->type != GgufType::kArray || !probe.is_integer())
    return type_error(path_, key, "an array of integers", *v);
  std::vector<int64_t> out;
  out.reserve(v->size());
  for (const GgufValue& e : v->elements()) {
    if (e.type == GgufType::kU64 && e.i64 < 0)
      return type_error(path_, key, "an array of integers up to 2^63", *v);
    out.push_back(e.i64);
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

Result<std::optional<std::vector<double>>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::optional<std::vector<double>>();
  GgufValue probe;
  probe.type = v->elem_type;
  if (v->type != GgufType::kArray || !(probe.is_float() || probe.is_integer()))
    return type_error(path_, key, "an array of numbers", *v);
  std::vector<double> out;
  out.reserve(v->size());
  for (const GgufValue& e : v->elements())
    out.push_back(e.is_float()               ? e.f64
                  : e.type == GgufType::kU64 ? static_cast<double>(e.u64)
                                             : static_cast<double>(e.i64));
  return std::optional<std::vector<double>>(std::move(out));
}

}  // namespace rlt::io
