#include "structured/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "common/utf8.h"
#include "structured/gbnf.h"
#include "structured/regex_to_gbnf.h"
#include "structured/utf8_ranges.h"

namespace rlt::structured {
namespace {

// Ordered: properties are emitted in the schema's order.
using json = nlohmann::ordered_json;

// Largest integer bound handled exactly (the integer grammar allows 16 digits).
constexpr double kMaxBound = 1e15;

constexpr const char* kPrimitives = R"(ws ::= "" | " " | "\n"{1,2} [ \t]{0,20}
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" json-u4) | "\\u" [dD] [89abAB] json-hex json-hex "\\u" [dD] [c-fC-F] json-hex json-hex
json-hex ::= [0-9a-fA-F]
json-u4 ::= [0-9a-cA-Ce-fE-F] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws (json-string ws ":" ws json-value ws ("," ws json-string ws ":" ws json-value ws)*)? "}"
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
)";

// Standard keywords that constrain instances in ways the engine cannot express: refused by name.
// Other keywords the engine does not handle are annotations (JSON Schema treats unknown keywords
// so): title, description, examples, default, x-vendor fields, ...
const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k = {"not",
                                          "if",
                                          "then",
                                          "else",
                                          "patternProperties",
                                          "propertyNames",
                                          "dependentRequired",
                                          "dependentSchemas",
                                          "dependencies",
                                          "unevaluatedProperties",
                                          "unevaluatedItems",
                                          "contains",
                                          "minContains",
                                          "maxContains",
                                          "uniqueItems",
                                          "multipleOf",
                                          "additionalItems",
                                          "contentSchema",
                                          "$dynamicRef",
                                          "$recursiveRef"};
  return k;
}

std::string digits(int64_t v) {
  return std::to_string(v);
}

// Digit strings (no leading zeros) of the integers in [lo, hi] with the same digit count.
void same_length_range(const std::string& lo, const std::string& hi, std::vector<std::string>& out,
                       const std::string& prefix = "") {
  const size_t n = lo.size();
  if (n == 0) {
    out.push_back(prefix.empty() ? "\"\"" : prefix);
    return;
  }
  const auto cls = [](char a, char b) {
    return a == b ? fmt::format("\"{}\"", a) : fmt::format("[{}-{}]", a, b);
  };
  const auto join = [](const std::string& a, const std::string& b) {
    return a.empty() ? b : a + " " + b;
  };
  if (lo[0] == hi[0]) {
    same_length_range(lo.substr(1), hi.substr(1), out, join(prefix, cls(lo[0], lo[0])));
    return;
  }
  const std::string tail_lo = lo.substr(1), tail_hi = hi.substr(1);
  const bool lo_zeros = tail_lo.find_first_not_of('0') == std::string::npos;
  const bool hi_nines = tail_hi.find_first_not_of('9') == std::string::npos;
  const char first = lo_zeros ? lo[0] : static_cast<char>(lo[0] + 1);
  const char last = hi_nines ? hi[0] : static_cast<char>(hi[0] - 1);
  if (!lo_zeros)
    same_length_range(tail_lo, std::string(n - 1, '9'), out, join(prefix, cls(lo[0], lo[0])));
  if (first <= last) {
    std::string p = join(prefix, cls(first, last));
    if (n > 1) p += fmt::format(" [0-9]{{{}}}", n - 1);
    out.push_back(p);
  }
  if (!hi_nines)
    same_length_range(std::string(n - 1, '0'), tail_hi, out, join(prefix, cls(hi[0], hi[0])));
}

// Digit strings of the integers in [lo, hi] (0 <= lo; hi absent: unbounded, up to 16 digits).
std::vector<std::string> nonnegative_range(int64_t lo, std::optional<int64_t> hi) {
  std::vector<std::string> out;
  const size_t lo_len = digits(lo).size();
  const size_t hi_len = hi ? digits(*hi).size() : 16;
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const int64_t first =
        len == 1 ? 0 : static_cast<int64_t>(std::pow(10.0, static_cast<double>(len - 1)));
    const std::string all_nines(len, '9');
    const std::string a = len == lo_len ? digits(lo) : digits(first);
    const std::string b = (hi && len == hi_len) ? digits(*hi) : all_nines;
    if (a.size() == b.size() && a <= b) same_length_range(a, b, out);
  }
  return out;
}

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.empty()) return "[^\\x00-\\U0010FFFF]";  // nothing matches
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return "(" + out + ")";
}

class Converter {
 public:
  Converter(json root, JsonGbnfOptions options)
      : root_(std::move(root)), options_(std::move(options)) {}

  Result<std::string> run() {
    RLT_ASSIGN_OR_RETURN(std::string root_rule, visit(root_, "", "root-value"));
    std::string out =
        options_.root + " ::= " + root_rule + "\n" + (options_.primitives ? kPrimitives : "");
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    return out;
  }

 private:
  Status unsupported(const std::string& path, const std::string& what) const {
    return invalid_argument(
        fmt::format("JSON schema at '{}': {} is not supported by the structured-output engine",
                    path.empty() ? "#" : "#" + path, what));
  }

  std::string new_rule(const std::string& hint, std::string body) {
    std::string base;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (base.empty()) base = "r";
    std::string name = fmt::format("{}{}-{}", options_.prefix, base.substr(0, 40), rules_.size());
    rule_index_[name] = rules_.size();
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  // The rule name matching `schema` (at JSON pointer `path`).
  Result<std::string> visit(const json& schema, const std::string& path, const std::string& hint) {
    if (++depth_ > 256) return invalid_argument("JSON schema nests more than 256 levels deep");
    auto r = visit_inner(schema, path, hint);
    --depth_;
    return r;
  }

  Result<std::string> visit_inner(const json& schema, const std::string& path,
                                  const std::string& hint) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return std::string("json-value");
      return unsupported(path, "the schema `false` (no value is valid)");
    }
    if (!schema.is_object())
      return invalid_argument(
          fmt::format("JSON schema at '#{}' must be an object or a boolean", path));

    for (const auto& [key, value] : schema.items()) {
      if (unsupported_keywords().count(key) && !(key == "uniqueItems" && value == false))
        return unsupported(path, fmt::format("keyword '{}'", key));
    }
    if (schema.contains("$ref")) {
      if (schema.size() > 1) {
        for (const auto& [key, value] : schema.items()) {
          (void)value;
          if (key != "$ref" && constrains(key))
            return unsupported(path, fmt::format("'$ref' beside the keyword '{}'", key));
        }
      }
      return visit_ref(schema["$ref"], path);
    }
    if (schema.contains("const") || schema.contains("enum"))
      return visit_values(schema, path, hint);
    if (schema.contains("anyOf") || schema.contains("oneOf"))
      return visit_union(schema, path, hint);
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1)
        return unsupported(path, "'allOf' with more than one schema");
      for (const auto& [k, v] : schema.items()) {
        (void)v;
        if (k != "allOf" && constrains(k))
          return unsupported(path, fmt::format("'allOf' beside the keyword '{}'", k));
      }
      return visit(all[0], path + "/allOf/0", hint);
    }

    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& t = schema["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array()) {
        for (const auto& x : t) {
          if (!x.is_string())
            return invalid_argument(
                fmt::format("JSON schema at '#{}': 'type' entries must be strings", path));
          types.push_back(x.get<std::string>());
        }
      } else {
        return invalid_argument(
            fmt::format("JSON schema at '#{}': 'type' must be a string or an array", path));
      }
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("minProperties") || schema.contains("maxProperties") ||
               schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems") ||
               schema.contains("minItems") || schema.contains("maxItems")) {
      types.push_back("array");
    } else if (schema.contains("minLength") || schema.contains("maxLength") ||
               schema.contains("pattern") || schema.contains("format")) {
      types.push_back("string");
    } else if (schema.contains("minimum") || schema.contains("maximum") ||
               schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return std::string("json-value");
    }
    if (schema.value("nullable", false) &&
        std::find(types.begin(), types.end(), "null") == types.end()) {
      types.push_back("null");
    }
    std::vector<std::string> alts;
    for (const auto& t : types) {
      RLT_ASSIGN_OR_RETURN(std::string a, visit_type(schema, t, path, hint));
      alts.push_back(a);
    }
    return alts.size() == 1 ? alts[0] : new_rule(hint, alternatives(alts));
  }

  // Whether `key` constrains instances (handled here, or refused): beside $ref or anyOf/oneOf it
  // would be dropped, so it is refused there.
  bool constrains(const std::string& key) const {
    static const std::set<std::string> handled = {"$ref",
                                                  "const",
                                                  "enum",
                                                  "anyOf",
                                                  "oneOf",
                                                  "allOf",
                                                  "type",
                                                  "nullable",
                                                  "properties",
                                                  "required",
                                                  "additionalProperties",
                                                  "minProperties",
                                                  "maxProperties",
                                                  "items",
                                                  "prefixItems",
                                                  "minItems",
                                                  "maxItems",
                                                  "minLength",
                                                  "maxLength",
                                                  "pattern",
                                                  "format",
                                                  "minimum",
                                                  "maximum",
                                                  "exclusiveMinimum",
                                                  "exclusiveMaximum"};
    return handled.count(key) > 0 || unsupported_keywords().count(key) > 0;
  }

  // Whether JSON value `v` is of JSON Schema type `type`.
  static bool has_type(const json& v, const std::string& type) {
    if (type == "integer") {
      return v.is_number_integer() || v.is_number_unsigned() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    }
    if (type == "number") return v.is_number();
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_boolean();
    if (type == "null") return v.is_null();
    if (type == "array") return v.is_array();
    if (type == "object") return v.is_object();
    return false;
  }

  // const / enum: the listed values (written as JSON), filtered by a sibling `type`.
  Result<std::string> visit_values(const json& schema, const std::string& path,
                                   const std::string& hint) {
    const bool is_const = schema.contains("const");
    const json values = is_const ? json::array({schema["const"]}) : schema["enum"];
    if (!values.is_array() || values.empty())
      return invalid_argument(
          fmt::format("JSON schema at '#{}': 'enum' must be a non-empty array", path));
    std::vector<std::string> types;
    for (const auto& [k, v] : schema.items()) {
      if (k == "const" || k == "enum" || !constrains(k)) continue;
      if (k != "type")
        return unsupported(
            path, fmt::format("'{}' beside the keyword '{}'", is_const ? "const" : "enum", k));
      if (v.is_string()) types.push_back(v.get<std::string>());
      if (v.is_array())
        for (const auto& t : v)
          if (t.is_string()) types.push_back(t.get<std::string>());
    }
    std::vector<std::string> alts;
    for (const auto& v : values) {
      if (v.is_number_float() && std::fabs(v.get<double>()) > 9007199254740992.0)
        return unsupported(path,
                           "a number beyond 2^53 in 'const' or 'enum' (it would lose its digits)");
      if (!types.empty() && std::none_of(types.begin(), types.end(),
                                         [&](const std::string& t) { return has_type(v, t); }))
        continue;
      alts.push_back(gbnf_literal(v.dump()));
    }
    if (alts.empty())
      return invalid_argument(
          fmt::format("JSON schema at '#{}': no value of '{}' has the schema's type", path,
                      is_const ? "const" : "enum"));
    return new_rule(hint, alternatives(alts));
  }

  Result<std::string> visit_ref(const json& ref, const std::string& path) {
    if (!ref.is_string())
      return invalid_argument(fmt::format("JSON schema at '#{}': '$ref' must be a string", path));
    const std::string target = ref.get<std::string>();
    if (target.empty() || target[0] != '#')
      return unsupported(
          path, fmt::format("the remote reference '{}' (only references inside the schema, '#...')",
                            target));
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const json* resolved = &root_;
    if (target.size() > 1) {
      try {
        const json::json_pointer pointer(target.substr(1));
        if (!root_.contains(pointer))
          return invalid_argument(
              fmt::format("JSON schema at '#{}': '$ref' {} points nowhere", path, target));
        resolved = &root_.at(pointer);
      } catch (const json::exception& e) {
        return invalid_argument(fmt::format(
            "JSON schema at '#{}': '$ref' {} is not a JSON pointer: {}", path, target, e.what()));
      }
    }
    // Named before it is visited, so a recursive reference ends at this rule.
    const std::string name = new_rule("ref", "");
    refs_[target] = name;
    RLT_ASSIGN_OR_RETURN(std::string body, visit(*resolved, target.substr(1), "def"));
    rules_[rule_index_.at(name)].second = body;
    return name;
  }

  // The JSON types a branch can produce, for oneOf's disjointness check; empty: unknown.
  std::set<std::string> branch_types(const json& s) const {
    if (!s.is_object()) return {};
    std::set<std::string> out;
    if (s.contains("type")) {
      if (s["type"].is_string()) out.insert(s["type"].get<std::string>());
      if (s["type"].is_array()) {
        for (const auto& t : s["type"]) {
          if (t.is_string()) out.insert(t.get<std::string>());
        }
      }
    } else if (s.contains("const") || s.contains("enum")) {
      const json values = s.contains("const") ? json::array({s["const"]}) : s["enum"];
      if (!values.is_array()) return {};
      for (const auto& v : values) {
        out.insert(v.is_number_integer() || v.is_number_unsigned() ? "integer"
                   : v.is_number()                                 ? "number"
                   : v.is_string()                                 ? "string"
                   : v.is_boolean()                                ? "boolean"
                   : v.is_null()                                   ? "null"
                   : v.is_array()                                  ? "array"
                                                                   : "object");
      }
    }
    if (out.count("integer")) out.insert("number");  // every integer is a number
    if (out.count("number")) out.insert("integer");
    return out;
  }

  Result<std::string> visit_union(const json& schema, const std::string& path,
                                  const std::string& hint) {
    const bool one = schema.contains("oneOf");
    const char* key = one ? "oneOf" : "anyOf";
    const json& branches = schema[key];
    if (!branches.is_array() || branches.empty())
      return invalid_argument(
          fmt::format("JSON schema at '#{}': '{}' must be a non-empty array", path, key));
    for (const auto& [k, v] : schema.items()) {
      (void)v;
      if (k != key && constrains(k))
        return unsupported(path, fmt::format("'{}' beside the keyword '{}'", key, k));
    }
    if (one) {
      // A value matching two branches would break oneOf: accept only branches of disjoint types.
      std::set<std::string> seen;
      for (const auto& b : branches) {
        const auto types = branch_types(b);
        if (types.empty())
          return unsupported(path, "'oneOf' whose branches are not told apart by their types");
        for (const auto& t : types) {
          if (!seen.insert(t).second)
            return unsupported(path, "'oneOf' with two branches of the same type (use 'anyOf')");
        }
      }
    }
    std::vector<std::string> alts;
    for (size_t i = 0; i < branches.size(); ++i) {
      RLT_ASSIGN_OR_RETURN(std::string a,
                           visit(branches[i], fmt::format("{}/{}/{}", path, key, i), hint));
      alts.push_back(a);
    }
    return new_rule(hint, alternatives(alts));
  }

  Result<std::string> visit_type(const json& schema, const std::string& type,
                                 const std::string& path, const std::string& hint) {
    if (type == "string") return visit_string(schema, path, hint);
    if (type == "integer" || type == "number")
      return visit_number(schema, type == "integer", path, hint);
    if (type == "boolean") return new_rule(hint, "(\"true\" | \"false\")");
    if (type == "null") return new_rule(hint, "\"null\"");
    if (type == "object") return visit_object(schema, path, hint);
    if (type == "array") return visit_array(schema, path, hint);
    return invalid_argument(fmt::format("JSON schema at '#{}': unknown type '{}'", path, type));
  }

  Result<std::optional<int64_t>> count(const json& schema, const char* key,
                                       const std::string& path) {
    if (!schema.contains(key)) return std::optional<int64_t>();
    const json& v = schema[key];
    if (!v.is_number_integer() && !v.is_number_unsigned())
      return invalid_argument(
          fmt::format("JSON schema at '#{}': '{}' must be a non-negative integer", path, key));
    const int64_t n = v.get<int64_t>();
    if (n < 0)
      return invalid_argument(
          fmt::format("JSON schema at '#{}': '{}' must be a non-negative integer", path, key));
    if (n > 4096) return unsupported(path, fmt::format("'{}' above 4096", key));
    return std::optional<int64_t>(n);
  }

  static std::string repeat(const std::string& unit, int64_t min, std::optional<int64_t> max) {
    if (!max) return fmt::format("{}{{{},}}", unit, min);
    return fmt::format("{}{{{},{}}}", unit, min, *max);
  }

  Result<std::string> visit_string(const json& schema, const std::string& path,
                                   const std::string& hint) {
    RLT_ASSIGN_OR_RETURN(auto min, count(schema, "minLength", path));
    RLT_ASSIGN_OR_RETURN(auto max, count(schema, "maxLength", path));
    if (min && max && *max < *min)
      return invalid_argument(
          fmt::format("JSON schema at '#{}': maxLength is below minLength", path));
    const bool lengths = min || max;
    if (schema.contains("pattern")) {
      if (lengths) return unsupported(path, "'pattern' together with 'minLength'/'maxLength'");
      if (schema.contains("format")) return unsupported(path, "'pattern' together with 'format'");
      if (!schema["pattern"].is_string())
        return invalid_argument(
            fmt::format("JSON schema at '#{}': 'pattern' must be a string", path));
      auto body = regex_to_gbnf(schema["pattern"].get<std::string>(), RegexTarget::kJsonString);
      if (!body.ok())
        return invalid_argument(
            fmt::format("JSON schema at '#{}/pattern': {}", path, body.status().message()));
      return new_rule(hint, "\"\\\"\" " + *body + " \"\\\"\"");
    }
    if (schema.contains("format")) {
      if (lengths) return unsupported(path, "'format' together with 'minLength'/'maxLength'");
      const std::string format =
          schema["format"].is_string() ? schema["format"].get<std::string>() : "";
      RLT_ASSIGN_OR_RETURN(std::string body, format_body(format, path));
      return new_rule(hint, "\"\\\"\" " + body + " \"\\\"\"");
    }
    if (!lengths) return std::string("json-string");
    return new_rule(hint, "\"\\\"\" " + repeat("json-char", min.value_or(0), max) + " \"\\\"\"");
  }

  Result<std::string> format_body(const std::string& format, const std::string& path) {
    const std::string time =
        R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))";
    // A calendar date, as a validator checks it (RFC 3339 full-date): years 0001-9999, the days
    // each month has, February 29 only in leap years (divisible by 4, centuries by 400).
    const std::string date =
        R"((([0-9]{3} [1-9] | [0-9]{2} [1-9] "0" | [0-9] [1-9] "00" | [1-9] "000") "-" )"
        R"((("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | )"
        R"(("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])) | )"
        R"(([0-9]{2} ("0" [48] | [2468] [048] | [13579] [26]) | ("0" [48] | [2468] [048] | [13579] [26]) "00") )"
        R"("-02-29"))";
    if (format == "date") return "(" + date + ")";
    if (format == "time") return "(" + time + ")";
    if (format == "date-time") return "(" + date + " \"T\" " + time + ")";
    if (format == "uuid")
      return std::string(
          R"(([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}))");
    if (format == "email")
      return std::string(
          R"(([a-zA-Z0-9_%+-] [a-zA-Z0-9._%+-]{0,63} "@" [a-zA-Z0-9] [a-zA-Z0-9-]{0,62} ("." [a-zA-Z] [a-zA-Z0-9-]{0,62}){1,4}))");
    if (format == "ipv4") {
      const std::string octet = alternatives(nonnegative_range(0, 255));
      return "(" + octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet + ")";
    }
    return unsupported(
        path,
        fmt::format("string format '{}' (supported: date, time, date-time, uuid, email, ipv4)",
                    format));
  }

  // A bound of `key` as a double, if present.
  Result<std::optional<double>> bound(const json& schema, const char* key,
                                      const std::string& path) {
    if (!schema.contains(key)) return std::optional<double>();
    const json& v = schema[key];
    if (!v.is_number()) {
      if (v.is_boolean())
        return unsupported(path, fmt::format("the draft-4 boolean form of '{}'", key));
      return invalid_argument(
          fmt::format("JSON schema at '#{}': '{}' must be a number", path, key));
    }
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > kMaxBound)
      return unsupported(path, fmt::format("'{}' beyond ±1e15", key));
    return std::optional<double>(d);
  }

  // Decimal digits (integer part, optional fraction) of the magnitudes in the given range.
  // lo: inclusive integer, or lo_open: the magnitude must exceed lo. hi: bound (nullopt: none).
  static std::string magnitude(int64_t lo, bool lo_open, std::optional<int64_t> hi, bool hi_open) {
    std::vector<std::string> alts;
    const std::string frac = "(\".\" [0-9]{1,16})?";
    const std::string nonzero_frac = "(\".\" [0-9]{0,15} [1-9])";
    const int64_t free_lo = lo_open ? lo + 1 : lo;
    if (lo_open && (!hi || lo < *hi))
      alts.push_back(alternatives(nonnegative_range(lo, lo)) + " " + nonzero_frac);
    // Integer parts whose every fraction is inside: [free_lo, hi - 1] (or unbounded).
    const std::optional<int64_t> free_hi = hi ? std::optional<int64_t>(*hi - 1) : std::nullopt;
    if (!free_hi || free_lo <= *free_hi)
      alts.push_back(alternatives(nonnegative_range(free_lo, free_hi)) + " " + frac);
    if (hi && !hi_open && *hi >= free_lo) alts.push_back(alternatives(nonnegative_range(*hi, *hi)));
    return alternatives(alts);
  }

  Result<std::string> visit_number(const json& schema, bool integer, const std::string& path,
                                   const std::string& hint) {
    RLT_ASSIGN_OR_RETURN(auto min, bound(schema, "minimum", path));
    RLT_ASSIGN_OR_RETURN(auto max, bound(schema, "maximum", path));
    RLT_ASSIGN_OR_RETURN(auto xmin, bound(schema, "exclusiveMinimum", path));
    RLT_ASSIGN_OR_RETURN(auto xmax, bound(schema, "exclusiveMaximum", path));
    if (!min && !max && !xmin && !xmax) return std::string(integer ? "json-int" : "json-number");
    // The tighter of each pair; open = exclusive.
    std::optional<double> lo, hi;
    bool lo_open = false, hi_open = false;
    if (min) lo = min;
    if (xmin && (!lo || *xmin >= *lo)) lo = xmin, lo_open = true;
    if (max) hi = max;
    if (xmax && (!hi || *xmax <= *hi)) hi = xmax, hi_open = true;
    if (integer) {
      // Integers: exact, with the bounds rounded inwards.
      std::optional<int64_t> a, b;
      if (lo) a = static_cast<int64_t>(lo_open ? std::floor(*lo) + 1 : std::ceil(*lo));
      if (hi) b = static_cast<int64_t>(hi_open ? std::ceil(*hi) - 1 : std::floor(*hi));
      if (a && b && *a > *b)
        return invalid_argument(
            fmt::format("JSON schema at '#{}': no integer lies within the bounds", path));
      std::vector<std::string> alts;
      if (!b || *b >= 0)
        alts.push_back(alternatives(nonnegative_range(std::max<int64_t>(a.value_or(0), 0), b)));
      if (!a || *a < 0) {
        // Negative integers: "-" and magnitudes in [max(-b, 1), -a].
        const int64_t mlo = b && *b < 0 ? -*b : 1;
        alts.push_back("\"-\" " + alternatives(a ? nonnegative_range(mlo, -*a)
                                                 : nonnegative_range(mlo, std::nullopt)));
      }
      return new_rule(hint, alternatives(alts));
    }
    for (const auto& [v, key] : {std::pair{lo, "minimum"}, std::pair{hi, "maximum"}}) {
      if (v && std::floor(*v) != *v)
        return unsupported(path, fmt::format("a non-integral {} on a number", key));
    }
    std::optional<int64_t> a, b;
    if (lo) a = static_cast<int64_t>(*lo);
    if (hi) b = static_cast<int64_t>(*hi);
    if (a && b && (*a > *b || (*a == *b && (lo_open || hi_open))))
      return invalid_argument(
          fmt::format("JSON schema at '#{}': no number lies within the bounds", path));
    std::vector<std::string> alts;
    // Non-negative values: magnitudes in [max(a, 0), b].
    if (!b || *b > 0 || (*b == 0 && !hi_open)) {
      const bool from_a = a && *a >= 0;
      alts.push_back(magnitude(from_a ? *a : 0, from_a && lo_open, b, hi_open));
    }
    // Negative values: "-" and magnitudes in (max(-b, 0), -a] (strictly above 0).
    if (!a || *a < 0) {
      const bool from_b = b && *b < 0;
      const int64_t mlo = from_b ? -*b : 0;
      const bool mlo_open = from_b ? hi_open : true;
      alts.push_back("\"-\" " + (a ? magnitude(mlo, mlo_open, -*a, lo_open)
                                   : magnitude(mlo, mlo_open, std::nullopt, lo_open)));
    }
    return new_rule(hint, alternatives(alts));
  }

  Result<std::string> visit_object(const json& schema, const std::string& path,
                                   const std::string& hint) {
    std::vector<std::pair<std::string, const json*>> props;
    if (schema.contains("properties")) {
      const json& p = schema["properties"];
      if (!p.is_object())
        return invalid_argument(
            fmt::format("JSON schema at '#{}': 'properties' must be an object", path));
      for (const auto& [k, v] : p.items()) props.push_back({k, &v});
    }
    std::set<std::string> required;
    if (schema.contains("required")) {
      const json& r = schema["required"];
      if (!r.is_array())
        return invalid_argument(
            fmt::format("JSON schema at '#{}': 'required' must be an array", path));
      for (const auto& x : r) {
        if (!x.is_string())
          return invalid_argument(
              fmt::format("JSON schema at '#{}': 'required' entries must be strings", path));
        required.insert(x.get<std::string>());
      }
    }
    // A required name that is not declared is governed by additionalProperties.
    static const json kAny = true;
    const json* additional_schema =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    for (const auto& name : required) {
      if (std::any_of(props.begin(), props.end(), [&](const auto& p) { return p.first == name; }))
        continue;
      if (additional_schema != nullptr && additional_schema->is_boolean() &&
          !additional_schema->get<bool>())
        return invalid_argument(
            fmt::format("JSON schema at '#{}': the required property '{}' is not declared and "
                        "additionalProperties is false: no object is valid",
                        path, name));
      props.push_back({name, additional_schema != nullptr && additional_schema->is_object()
                                 ? additional_schema
                                 : &kAny});
    }
    // Extra properties: false when properties are declared (strict), else any value.
    std::optional<std::string> extra;
    const json* additional =
        schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
    if (additional == nullptr ? props.empty()
                              : !(additional->is_boolean() && !additional->get<bool>())) {
      if (additional == nullptr || additional->is_boolean()) {
        extra = "json-value";
      } else {
        RLT_ASSIGN_OR_RETURN(std::string e,
                             visit(*additional, path + "/additionalProperties", hint + "-extra"));
        extra = e;
      }
    }
    std::vector<std::string> kv;
    for (size_t i = 0; i < props.size(); ++i) {
      RLT_ASSIGN_OR_RETURN(
          std::string value,
          visit(*props[i].second, path + "/properties/" + props[i].first, props[i].first));
      kv.push_back(gbnf_literal(json(props[i].first).dump()) + " ws \":\" ws " + value);
    }
    // rest_i: members i.. after at least one member; first_i: members i.. before any.
    const size_t n = props.size();
    // minProperties / maxProperties bound the extra members, counting every declared property as
    // present for the maximum and only the required ones for the minimum: whatever optional
    // members appear, the count stays within the bounds (some valid objects are not generated).
    RLT_ASSIGN_OR_RETURN(auto min_props, count(schema, "minProperties", path));
    RLT_ASSIGN_OR_RETURN(auto max_props, count(schema, "maxProperties", path));
    const auto declared = static_cast<int64_t>(n);
    const auto required_count = static_cast<int64_t>(required.size());
    int64_t extra_lo = std::max<int64_t>(0, min_props.value_or(0) - required_count);
    std::optional<int64_t> extra_hi;
    if (max_props) {
      if (*max_props < declared)
        return unsupported(path, "'maxProperties' below the number of declared properties");
      extra_hi = *max_props - declared;
    }
    if (extra_hi && *extra_hi < extra_lo)
      return invalid_argument(fmt::format(
          "JSON schema at '#{}': no object meets minProperties and maxProperties", path));
    if (extra_lo > 0 && !extra)
      return unsupported(
          path, "'minProperties' above the required properties without additionalProperties");
    if (extra_hi && *extra_hi == 0) extra.reset();
    std::string rest_tail, first_tail;
    if (extra) {
      std::vector<std::string> names;
      for (const auto& p : props) names.push_back(p.first);
      const std::string member = excluded_key(names, hint) + " ws \":\" ws " + *extra;
      const std::string more = "(\",\" ws " + member + " ws)";
      rest_tail = new_rule(hint + "-more", repeat(more, extra_lo, extra_hi));
      const int64_t after_first_lo = std::max<int64_t>(extra_lo - 1, 0);
      const std::optional<int64_t> after_first_hi =
          extra_hi ? std::optional<int64_t>(*extra_hi - 1) : std::nullopt;
      const std::string one_or_more =
          member + " ws " + repeat(more, after_first_lo, after_first_hi);
      first_tail = new_rule(hint + "-any", extra_lo > 0 ? one_or_more : "(" + one_or_more + ")?");
    }
    std::string rest = rest_tail, first = first_tail;
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(props[i].first) > 0;
      const std::string with = "\",\" ws " + kv[i] + " ws" + (rest.empty() ? "" : " " + rest);
      const std::string rest_body =
          req ? with : "(" + with + (rest.empty() ? " | \"\")" : " | " + rest + ")");
      const std::string first_with = kv[i] + " ws" + (rest.empty() ? "" : " " + rest);
      const std::string first_body =
          req ? first_with : "(" + first_with + (first.empty() ? " | \"\")" : " | " + first + ")");
      rest = new_rule(hint + "-rest", rest_body);
      first = new_rule(hint + "-members", first_body);
    }
    return new_rule(hint, "\"{\" ws " + (first.empty() ? "" : first + " ") + "\"}\"");
  }

  // A JSON string key (without escapes) that is none of `names`: extra properties must not repeat
  // a declared one (with a value of another schema). A trie over the names' characters.
  std::string excluded_key(const std::vector<std::string>& names, const std::string& hint) {
    struct Node {
      std::map<char32_t, size_t> children;
      bool is_name = false;
    };
    std::vector<Node> trie(1);
    for (const auto& name : names) {
      std::u32string cps;  // names come from parsed JSON: valid UTF-8
      for (size_t i = 0; i < name.size();) {
        char32_t cp = 0;
        i += utf8::decode(name, i, cp);
        cps.push_back(cp);
      }
      // Names holding '"', '\\' or controls need escapes, which extra keys never use.
      if (std::any_of(cps.begin(), cps.end(),
                      [](char32_t c) { return c == '"' || c == '\\' || c < 0x20; }))
        continue;
      size_t u = 0;
      for (char32_t c : cps) {
        auto it = trie[u].children.find(c);
        if (it == trie[u].children.end()) {
          trie.push_back(Node{});
          it = trie[u].children.emplace(c, trie.size() - 1).first;
        }
        u = it->second;
      }
      trie[u].is_name = true;
    }
    const std::string any_rest = new_rule(hint + "-key-rest", "[^\"\\\\\\x00-\\x1F]* \"\\\"\"");
    std::vector<std::string> rule_of(trie.size());
    for (size_t u = trie.size(); u-- > 0;)
      rule_of[u] = new_rule(hint + "-key", "");  // named first: children refer to them
    for (size_t u = 0; u < trie.size(); ++u) {
      std::vector<std::string> alts;
      if (!trie[u].is_name) alts.push_back("\"\\\"\"");
      std::string others = "[^\"\\\\\\x00-\\x1F";
      for (const auto& [c, v] : trie[u].children) {
        std::string bytes;
        utf8::append(bytes, c);
        alts.push_back(gbnf_literal(bytes) + " " + rule_of[v]);
        if (c == ']' || c == '[' || c == '-' || c == '^') others += '\\';
        others += bytes;
      }
      alts.push_back(others + "] " + any_rest);
      rules_[rule_index_.at(rule_of[u])].second = alternatives(alts);
    }
    return "\"\\\"\" " + rule_of[0];
  }

  Result<std::string> visit_array(const json& schema, const std::string& path,
                                  const std::string& hint) {
    RLT_ASSIGN_OR_RETURN(auto min, count(schema, "minItems", path));
    RLT_ASSIGN_OR_RETURN(auto max, count(schema, "maxItems", path));
    if (min && max && *max < *min)
      return invalid_argument(
          fmt::format("JSON schema at '#{}': maxItems is below minItems", path));
    std::vector<std::string> prefix;
    if (schema.contains("prefixItems")) {
      const json& p = schema["prefixItems"];
      if (!p.is_array())
        return invalid_argument(
            fmt::format("JSON schema at '#{}': 'prefixItems' must be an array", path));
      for (size_t i = 0; i < p.size(); ++i) {
        RLT_ASSIGN_OR_RETURN(
            std::string item,
            visit(p[i], fmt::format("{}/prefixItems/{}", path, i), hint + "-item"));
        prefix.push_back(item);
      }
    }
    std::optional<std::string> item = std::string("json-value");
    if (schema.contains("items")) {
      const json& it = schema["items"];
      if (it.is_boolean() && !it.get<bool>()) {
        item.reset();
      } else if (it.is_array()) {
        return unsupported(path, "the array form of 'items' (use 'prefixItems')");
      } else {
        RLT_ASSIGN_OR_RETURN(std::string i, visit(it, path + "/items", hint + "-item"));
        item = i;
      }
    }
    // Items 1..k: prefix items first (each present while the count allows), then `item`.
    const int64_t lo = min.value_or(0);
    const std::optional<int64_t> hi = max;
    const int64_t np = static_cast<int64_t>(prefix.size());
    if (!item && lo > np)
      return invalid_argument(
          fmt::format("JSON schema at '#{}': minItems exceeds the tuple's length", path));
    // tail(j): the items from index j on, given j items already written (j >= 1).
    std::string tail;  // built from the back
    // tail(np): the open-ended `item` part after the prefix.
    std::string rest;
    if (item) {
      const int64_t need = std::max<int64_t>(lo - np, 0);
      std::optional<int64_t> allow;
      if (hi) allow = std::max<int64_t>(*hi - np, 0);
      if (!allow || *allow > 0) {
        rest = repeat("(\",\" ws " + *item + " ws)", need, allow);
        if (allow && *allow < need) rest.clear();
      }
    }
    tail = rest;
    for (int64_t j = np - 1; j >= 1; --j) {
      if (hi && j >= *hi) {
        tail.clear();  // j items already reach maxItems
        continue;
      }
      const std::string with =
          "\",\" ws " + prefix[static_cast<size_t>(j)] + " ws" + (tail.empty() ? "" : " " + tail);
      tail = new_rule(hint + "-tail", j + 1 > lo ? "(" + with + " | \"\")" : with);
    }
    std::string body;
    const bool first_is_prefix = np > 0;
    const std::string first_item = first_is_prefix ? prefix[0] : (item ? *item : "");
    std::string after_first;
    if (first_is_prefix) {
      after_first = tail;
    } else if (item) {
      // No prefix: the first item, then between lo-1 and hi-1 more.
      const int64_t need = std::max<int64_t>(lo - 1, 0);
      std::optional<int64_t> allow;
      if (hi) allow = std::max<int64_t>(*hi - 1, 0);
      after_first = repeat("(\",\" ws " + *item + " ws)", need, allow);
    }
    if (first_item.empty() || (hi && *hi == 0)) {
      body = "\"[\" ws \"]\"";
    } else {
      const std::string nonempty =
          first_item + " ws" + (after_first.empty() ? "" : " " + after_first);
      body = "\"[\" ws " + (lo == 0 ? "(" + nonempty + ")?" : nonempty) + " \"]\"";
    }
    return new_rule(hint, body);
  }

  json root_;
  JsonGbnfOptions options_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::unordered_map<std::string, size_t> rule_index_;
  std::map<std::string, std::string> refs_;
  int depth_ = 0;
};

}  // namespace

std::string json_object_gbnf() {
  return std::string("root ::= json-object\n") + kPrimitives;
}

std::string json_gbnf_primitives() {
  return kPrimitives;
}

Result<std::string> json_schema_to_gbnf(std::string_view schema_json,
                                        const JsonGbnfOptions& options) {
  json schema;
  // Deeper nesting than any schema needs is refused while parsing (the converter recurses).
  constexpr int kMaxDepth = 256;
  bool too_deep = false;
  const json::parser_callback_t limit = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxDepth) too_deep = true;
    return !too_deep;
  };
  try {
    schema = json::parse(schema_json, limit);
  } catch (const json::exception& e) {
    return invalid_argument(fmt::format("the JSON schema is not valid JSON: {}", e.what()));
  }
  if (too_deep)
    return invalid_argument(
        fmt::format("the JSON schema nests more than {} levels deep", kMaxDepth));
  return Converter(std::move(schema), options).run();
}

}  // namespace rlt::structured
