// Reads the fields of one JSON request object with OpenAI's types. Each read_* returns false once
// a problem is found and keeps the first problem as a 400 naming the field, so parsers read
// top to bottom and stop at the first failure.
//
// Null means "the default" for every optional field, as the official clients send it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"

namespace rlt::server {

using json = nlohmann::ordered_json;

class FieldReader {
 public:
  explicit FieldReader(const json& object) : object_(object) {}

  // Refuses every key not in `known`, naming all of them.
  bool only_known(std::initializer_list<std::string_view> known);
  // The value of `key`; nullptr when absent or null.
  const json* find(std::string_view key) const;

  bool read_int(std::string_view key, int64_t* out, int64_t lo, int64_t hi);
  bool read_int(std::string_view key, int* out, int lo, int hi);
  bool read_number(std::string_view key, double* out);  // integers are numbers too; bools are not
  bool read_bool(std::string_view key, bool* out);
  bool read_string(std::string_view key, std::string* out);

  // Records `error` unless one is already recorded; returns false.
  bool fail(ApiError error);
  bool ok() const { return !error_; }
  const std::optional<ApiError>& error() const { return error_; }

 private:
  const json& object_;
  std::optional<ApiError> error_;
};

// "string \"5\"", "boolean true", ...: how a wrong value is quoted in messages (shortened).
std::string describe_value(const json& value);

// A request body as JSON, refusing nesting deeper than any OpenAI body needs (deeper JSON is
// refused before anything walks it recursively).
std::optional<ApiError> parse_json_body(const std::string& text, json* out);

}  // namespace rlt::server
