// Typed, error-reporting access to nlohmann::json fields: a wrong type or a missing required key
// becomes a Status naming the field path, never an exception.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "rlt/status.h"

namespace rlt::tok::json_fields {

using Json = nlohmann::json;

std::string type_name(const Json& j);

// `where` is the path of `obj` (e.g. "model"); errors read "model.vocab: expected object, got
// string".
Result<const Json*> object_field(const Json& obj, std::string_view key, std::string_view where);
// Absent or null -> nullptr.
Result<const Json*> optional_field(const Json& obj, std::string_view key, std::string_view where);

Result<std::string> string_field(const Json& obj, std::string_view key, std::string_view where);
Result<std::optional<std::string>> optional_string(const Json& obj, std::string_view key,
                                                   std::string_view where);
Result<bool> bool_field(const Json& obj, std::string_view key, bool fallback,
                        std::string_view where);
Result<int64_t> int_field(const Json& obj, std::string_view key, std::string_view where);
Result<int64_t> int_or(const Json& obj, std::string_view key, int64_t fallback,
                       std::string_view where);
// A string holding exactly one Unicode character (Rust `char` fields).
Result<char32_t> char_field(const Json& obj, std::string_view key, std::string_view where);

}  // namespace rlt::tok::json_fields
