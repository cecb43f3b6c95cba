// GBNF, llama.cpp's grammar notation, parsed into a byte-level Grammar. It is the text form of
// every constraint: JSON schemas and regular expressions are translated to GBNF first
// (json_schema.h, regex_to_gbnf.h), and users may send a grammar directly.
//
//   root    ::= "{" ws pair ("," ws pair)* "}"      # rules; `root` is where matching starts
//   pair    ::= string ":" ws [0-9]+                # "literals", [classes], [^negated], .
//   ws      ::= [ \t\n]{0,8}                         # ( ) | * + ? {m} {m,} {m,n}
//
// Literals and classes take the escapes \n \r \t \\ \" \] \[ \- \xHH \uHHHH \UHHHHHHHH; `.` is any
// character. Rules may be used before they are defined; left recursion is refused.
#pragma once

#include <string>
#include <string_view>

#include "structured/grammar.h"

namespace rlt::structured {

// Largest repetition bound ({m,n}) and element count a grammar may reach: each bounded
// repetition is unrolled, so these keep a request from building a grammar of unbounded size.
inline constexpr int kMaxRepetition = 4096;
inline constexpr size_t kMaxGrammarElements = size_t{1} << 20;

Result<Grammar> parse_gbnf(std::string_view text);

// A GBNF string literal matching exactly `text` (its bytes; control bytes escaped).
std::string gbnf_literal(std::string_view text);

}  // namespace rlt::structured
