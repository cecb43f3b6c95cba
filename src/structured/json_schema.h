// JSON Schema to GBNF: the grammar of exactly the JSON texts a schema accepts (for the features
// below), so that sampling under it can only produce valid instances.
//
// Supported: type (and lists of types), enum, const, anyOf, oneOf (branches of disjoint types),
// allOf with one member, $ref to "#" or a JSON pointer inside the schema (recursion allowed),
// $defs/definitions; objects: properties (emitted in schema order), required,
// additionalProperties (false, true or a schema; absent means false when properties are declared,
// as OpenAI's strict mode), nullable; arrays: items, prefixItems, minItems, maxItems; strings:
// minLength, maxLength, pattern, format (date, time, date-time, uuid, email, ipv4); integers:
// minimum, maximum, exclusiveMinimum, exclusiveMaximum; numbers: the same with integral bounds.
// Standard keywords that constrain instances in ways this cannot express (not, if/then/else,
// patternProperties, uniqueItems, multipleOf, ...) are refused with a message naming them and
// where they are — never silently dropped; keywords JSON Schema does not define are annotations.
//
// Whitespace between tokens is bounded: none, a space, or one or two newlines and up to 20 spaces
// or tabs of indentation (llama.cpp's rule: no runaway blank lines); integers have at most 16
// digits and fractions 16, so an output cannot run away inside one number.
#pragma once

#include <string>
#include <string_view>

#include "rlt/status.h"

namespace rlt::structured {

// How the grammar is written, for embedding it in a larger one: the rule that matches an
// instance, a prefix for the helper rules' names, and whether the shared JSON rules (ws,
// json-string, json-value, ...: json_gbnf_primitives()) are included.
struct JsonGbnfOptions {
  std::string root = "root";
  std::string prefix;
  bool primitives = true;
};

Result<std::string> json_schema_to_gbnf(std::string_view schema_json,
                                        const JsonGbnfOptions& options = {});

// The grammar of any JSON object (response_format json_object).
std::string json_object_gbnf();
// The shared JSON rules schema grammars refer to.
std::string json_gbnf_primitives();

}  // namespace rlt::structured
