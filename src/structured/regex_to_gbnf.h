// Regular expressions (the ECMAScript/Python subset below) as GBNF expressions.
//
// Supported: literals and escapes (\n \r \t \f \v \xHH \uHHHH \u{H..} and escaped punctuation),
// classes [...] and [^...] with ranges, \d \D \w \W \s \S (ASCII meanings), `.` (any character
// but newline), groups (...), (?:...), (?<name>...), (?P<name>...), alternation, quantifiers
// * + ? {m} {m,} {m,n} (lazy forms match the same language), ^ at the very start and $ at the very
// end. Refused, with the construct named: backreferences, lookaround, word boundaries, possessive
// quantifiers, inline flags, Unicode property classes.
#pragma once

#include <string>
#include <string_view>

#include "rlt/status.h"

namespace rlt::structured {

enum class RegexTarget {
  kText,        // the expression matches the output text itself (whole match)
  kJsonString,  // the content of a JSON string: characters are emitted JSON-escaped, and the
                // match is a search unless anchored with ^ / $ (JSON Schema `pattern`)
};

// A GBNF expression (no rule definitions; usable as a rule body).
Result<std::string> regex_to_gbnf(std::string_view regex, RegexTarget target);

}  // namespace rlt::structured
