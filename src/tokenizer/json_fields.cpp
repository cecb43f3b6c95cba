#include "tokenizer/json_fields.h"

#include <fmt/format.h>

#include "common/utf8.h"

namespace rlt::tok::json_fields {
namespace {

std::string path(std::string_view where, std::string_view key) {
  if (where.empty()) return std::string(key);
  return fmt::format("{}.{}", where, key);
}

Status wrong_type(std::string_view where, std::string_view key, std::string_view expected,
                  const Json& got) {
  return invalid_argument(
      fmt::format("{}: expected {}, got {}", path(where, key), expected, type_name(got)));
}

}  // namespace

std::string type_name(const Json& j) {
  return j.type_name();
}

Result<const Json*> optional_field(const Json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) {
    return invalid_argument(fmt::format("{}: expected object, got {}",
                                        where.empty() ? "document" : where, type_name(obj)));
  }
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return static_cast<const Json*>(nullptr);
  return &*it;
}

Result<const Json*> object_field(const Json& obj, std::string_view key, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return invalid_argument(fmt::format("{}: missing", path(where, key)));
  if (!f->is_object()) return wrong_type(where, key, "object", *f);
  return f;
}

Result<std::string> string_field(const Json& obj, std::string_view key, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return invalid_argument(fmt::format("{}: missing", path(where, key)));
  if (!f->is_string()) return wrong_type(where, key, "string", *f);
  return f->get<std::string>();
}

Result<std::optional<std::string>> optional_string(const Json& obj, std::string_view key,
                                                   std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return std::optional<std::string>();
  if (!f->is_string()) return wrong_type(where, key, "string", *f);
  return std::optional<std::string>(f->get<std::string>());
}

Result<bool> bool_field(const Json& obj, std::string_view key, bool fallback,
                        std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return fallback;
  if (!f->is_boolean()) return wrong_type(where, key, "boolean", *f);
  return f->get<bool>();
}

Result<int64_t> int_field(const Json& obj, std::string_view key, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return invalid_argument(fmt::format("{}: missing", path(where, key)));
  if (!f->is_number_integer()) return wrong_type(where, key, "integer", *f);
  return f->get<int64_t>();
}

Result<int64_t> int_or(const Json& obj, std::string_view key, int64_t fallback,
                       std::string_view where) {
  RLT_ASSIGN_OR_RETURN(const Json* f, optional_field(obj, key, where));
  if (f == nullptr) return fallback;
  if (!f->is_number_integer()) return wrong_type(where, key, "integer", *f);
  return f->get<int64_t>();
}

Result<char32_t> char_field(const Json& obj, std::string_view key, std::string_view where) {
  RLT_ASSIGN_OR_RETURN(std::string s, string_field(obj, key, where));
  if (s.empty() || !utf8::is_valid(s) || utf8::count_code_points(s) != 1) {
    return invalid_argument(
        fmt::format("{}: expected a single character, got \"{}\"", path(where, key), s));
  }
  char32_t cp = 0;
  utf8::decode(s, 0, cp);
  return cp;
}

}  // namespace rlt::tok::json_fields
