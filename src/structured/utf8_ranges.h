// Character classes over code points as byte-level grammar pieces: each class becomes the set of
// UTF-8 byte sequences that encode its characters (the technique of RE2 and Rust's utf8-ranges:
// split every range until each piece is a product of byte ranges). Surrogates (U+D800-DFFF) are
// never encoded.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "structured/grammar.h"

namespace rlt::structured {

using CodePointRange = std::pair<char32_t, char32_t>;  // inclusive

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged ranges; `negate` complements them over [0, kMaxCodePoint].
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate);

// The byte sequences (one ByteSet per byte) of every character in `ranges` (normalized).
std::vector<std::vector<ByteSet>> utf8_sequences(const std::vector<CodePointRange>& ranges);

// One element matching exactly one character of `ranges`: a byte set when every character is a
// single byte, else a reference to a new helper rule with one alternative per byte sequence.
Element char_class_element(GrammarBuilder& builder, const std::vector<CodePointRange>& ranges);

}  // namespace rlt::structured
