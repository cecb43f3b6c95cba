#include "server/request_fields.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <vector>

namespace rlt::server {

std::string describe_value(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return fmt::format("{} {}", value.type_name(), text);
}

bool FieldReader::only_known(std::initializer_list<std::string_view> known) {
  std::vector<std::string> unknown;
  for (const auto& [key, value] : object_.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == key;
    if (!found) unknown.push_back(key);
  }
  if (unknown.empty()) return ok();
  std::string names;
  for (const auto& u : unknown) names += (names.empty() ? "'" : ", '") + u + "'";
  return fail(invalid_request(fmt::format("unsupported field{} {}: rlt does not implement {}; remove {}",
                                          unknown.size() > 1 ? "s" : "", names,
                                          unknown.size() > 1 ? "them" : "it", unknown.size() > 1 ? "them" : "it"),
                              unknown.front()));
}

const json* FieldReader::find(std::string_view key) const {
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::read_int(std::string_view key, int64_t* out, int64_t lo, int64_t hi) {
  if (!ok()) return false;
  const json* v = find(key);
  if (v == nullptr) return true;
  const std::string name(key);
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if ((lo > 0 && u < static_cast<uint64_t>(lo)) || u > static_cast<uint64_t>(hi))
      return fail(invalid_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, u), name));
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (!v->is_number_integer())
    return fail(invalid_request(fmt::format("'{}' must be an integer, got {}", name, describe_value(*v)), name));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    return fail(invalid_request(fmt::format("'{}' must be in [{}, {}], got {}", name, lo, hi, x), name));
  *out = x;
  return true;
}

bool FieldReader::read_int(std::string_view key, int* out, int lo, int hi) {
  int64_t x = *out;
  if (!read_int(key, &x, lo, hi)) return false;
  *out = static_cast<int>(x);
  return true;
}

bool FieldReader::read_number(std::string_view key, double* out) {
  if (!ok()) return false;
  const json* v = find(key);
  if (v == nullptr) return true;
  const std::string name(key);
  if (!v->is_number())
    return fail(invalid_request(fmt::format("'{}' must be a number, got {}", name, describe_value(*v)), name));
  const double x = v->get<double>();
  if (!std::isfinite(x)) return fail(invalid_request(fmt::format("'{}' must be finite", name), name));
  *out = x;
  return true;
}

bool FieldReader::read_bool(std::string_view key, bool* out) {
  if (!ok()) return false;
  const json* v = find(key);
  if (v == nullptr) return true;
  if (!v->is_boolean()) {
    const std::string name(key);
    return fail(invalid_request(fmt::format("'{}' must be true or false, got {}", name, describe_value(*v)), name));
  }
  *out = v->get<bool>();
  return true;
}

bool FieldReader::read_string(std::string_view key, std::string* out) {
  if (!ok()) return false;
  const json* v = find(key);
  if (v == nullptr) return true;
  if (!v->is_string()) {
    const std::string name(key);
    return fail(invalid_request(fmt::format("'{}' must be a string, got {}", name, describe_value(*v)), name));
  }
  *out = v->get<std::string>();
  return true;
}

bool FieldReader::fail(ApiError error) {
  if (!error_) error_ = std::move(error);
  return false;
}

// Deeper JSON is refused before anything walks it recursively (dump, describe_value).
constexpr int kMaxJsonDepth = 32;

std::optional<ApiError> parse_json_body(const std::string& text, json* out) {
  bool too_deep = false;
  json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;
  };
  try {
    *out = json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    return invalid_request(fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (too_deep) return invalid_request(fmt::format("the body nests JSON deeper than {} levels", kMaxJsonDepth));
  return std::nullopt;
}

}  // namespace rlt::server
