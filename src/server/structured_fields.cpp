// Structured-output request fields: OpenAI's response_format, vLLM's structured_outputs and its
// older guided_* fields. At most one constraint per request; each becomes
// SamplingParams::structured_outputs, compiled (and refused with the reason) before queueing.
#include <fmt/format.h>

#include "server/request_parser.h"

namespace rlt::server {
namespace {

using Kind = StructuredOutputs::Kind;

// A JSON schema given as an object or as JSON text.
bool schema_text(FieldReader& r, const json& v, const std::string& param, std::string* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = v.dump();
    return true;
  }
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  return r.fail(invalid_request(
      fmt::format("'{}' must be a JSON schema (an object), got {}", param, describe_value(v)),
      param));
}

bool read_response_format(FieldReader& r, const json& v, std::optional<StructuredOutputs>* out) {
  if (!v.is_object())
    return r.fail(invalid_request(
        fmt::format(
            "'response_format' must be an object such as {{\"type\": \"json_object\"}}, got {}",
            describe_value(v)),
        "response_format"));
  const auto type = v.find("type");
  if (type == v.end() || !type->is_string())
    return r.fail(invalid_request(
        "'response_format' needs a \"type\": \"text\", \"json_object\" or \"json_schema\"",
        "response_format"));
  const std::string t = type->get<std::string>();
  if (t == "text") return true;
  if (t == "json_object") {
    *out = StructuredOutputs{Kind::kJsonObject, "", {}};
    return true;
  }
  if (t != "json_schema")
    return r.fail(invalid_request(fmt::format("'response_format.type' must be \"text\", "
                                              "\"json_object\" or \"json_schema\", got \"{}\"",
                                              t),
                                  "response_format"));
  const auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object())
    return r.fail(
        invalid_request("'response_format' of type \"json_schema\" needs \"json_schema\": "
                        "{\"name\": ..., \"schema\": {...}}",
                        "response_format"));
  const auto schema = js->find("schema");
  StructuredOutputs s{Kind::kJsonSchema, "", {}};
  if (schema == js->end() || schema->is_null()) {
    s.spec = "{}";  // OpenAI: no schema means any JSON value
  } else if (!schema_text(r, *schema, "response_format", &s.spec)) {
    return false;
  }
  *out = std::move(s);
  return true;
}

bool read_choice(FieldReader& r, const json& v, const std::string& param,
                 std::optional<StructuredOutputs>* out) {
  if (!v.is_array() || v.empty())
    return r.fail(
        invalid_request(fmt::format("'{}' must be a non-empty list of strings", param), param));
  StructuredOutputs s{Kind::kChoice, "", {}};
  for (const json& c : v) {
    if (!c.is_string() || c.get<std::string>().empty())
      return r.fail(invalid_request(
          fmt::format("'{}' entries must be non-empty strings, got {}", param, describe_value(c)),
          param));
    s.choices.push_back(c.get<std::string>());
  }
  *out = std::move(s);
  return true;
}

bool read_text(FieldReader& r, const json& v, const std::string& param, Kind kind,
               std::optional<StructuredOutputs>* out) {
  if (!v.is_string() || v.get<std::string>().empty())
    return r.fail(invalid_request(fmt::format("'{}' must be a non-empty string", param), param));
  *out = StructuredOutputs{kind, v.get<std::string>(), {}};
  return true;
}

// vLLM's structured_outputs object: exactly one of json, regex, choice, grammar, json_object.
bool read_vllm_object(FieldReader& r, const json& v, std::optional<StructuredOutputs>* out) {
  if (!v.is_object())
    return r.fail(
        invalid_request("'structured_outputs' must be an object such as {\"regex\": \"[0-9]+\"}",
                        "structured_outputs"));
  FieldReader inner(v);
  if (!inner.only_known({"json", "regex", "choice", "grammar", "json_object"})) {
    ApiError e = *inner.error();
    e.message = "structured_outputs: " + e.message;
    e.param = "structured_outputs";
    return r.fail(std::move(e));
  }
  int given = 0;
  for (const char* key : {"json", "regex", "choice", "grammar"})
    given += inner.find(key) != nullptr;
  bool json_object = false;
  if (!inner.read_bool("json_object", &json_object)) return r.fail(*inner.error());
  given += json_object;
  if (given != 1)
    return r.fail(
        invalid_request("'structured_outputs' needs exactly one of \"json\", \"regex\", "
                        "\"choice\", \"grammar\", \"json_object\"",
                        "structured_outputs"));
  const std::string param = "structured_outputs";
  if (json_object) {
    *out = StructuredOutputs{Kind::kJsonObject, "", {}};
    return true;
  }
  if (const json* j = inner.find("json")) {
    StructuredOutputs s{Kind::kJsonSchema, "", {}};
    if (!schema_text(r, *j, param, &s.spec)) return false;
    *out = std::move(s);
    return true;
  }
  if (const json* re = inner.find("regex")) return read_text(r, *re, param, Kind::kRegex, out);
  if (const json* g = inner.find("grammar")) return read_text(r, *g, param, Kind::kGrammar, out);
  return read_choice(r, *inner.find("choice"), param, out);
}

}  // namespace

void read_structured_outputs(FieldReader& r, GenerationRequest* out) {
  if (!r.ok()) return;
  std::optional<StructuredOutputs> spec;
  std::vector<std::string> given;
  const auto take = [&](const char* key, auto read) {
    const json* v = r.find(key);
    if (v == nullptr || !r.ok()) return;
    std::optional<StructuredOutputs> s;
    if (!read(*v, &s)) return;
    if (!s) return;  // response_format "text"
    given.push_back(key);
    spec = std::move(s);
  };
  take("response_format", [&](const json& v, auto* s) { return read_response_format(r, v, s); });
  take("structured_outputs", [&](const json& v, auto* s) { return read_vllm_object(r, v, s); });
  take("guided_json", [&](const json& v, auto* s) {
    StructuredOutputs x{Kind::kJsonSchema, "", {}};
    if (!schema_text(r, v, "guided_json", &x.spec)) return false;
    *s = std::move(x);
    return true;
  });
  take("guided_regex",
       [&](const json& v, auto* s) { return read_text(r, v, "guided_regex", Kind::kRegex, s); });
  take("guided_grammar", [&](const json& v, auto* s) {
    return read_text(r, v, "guided_grammar", Kind::kGrammar, s);
  });
  take("guided_choice",
       [&](const json& v, auto* s) { return read_choice(r, v, "guided_choice", s); });
  if (!r.ok()) return;
  if (given.size() > 1) {
    r.fail(invalid_request(
        fmt::format("'{}' and '{}' both constrain the output; send one", given[0], given[1]),
        given[1]));
    return;
  }
  if (spec) {
    out->params.structured_outputs = std::move(spec);
    out->structured_param = given[0];
  }
}

}  // namespace rlt::server
