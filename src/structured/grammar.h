// A context-free grammar over bytes: what every constraint (JSON schema, regex, choice, GBNF) is
// compiled to before the matcher runs it. Terminals are byte sets, so a character class over code
// points is stored as the UTF-8 byte sequences that encode it (utf8_ranges.h) and the matcher never
// decodes UTF-8: a token that ends inside a character is matched like any other byte string.
//
// Layout (flat, for the matcher's inner loop): every alternative of every rule is a run of
// elements in `elements` closed by a kEnd element; `alternatives[r]` lists where rule r's
// alternatives start. An empty alternative is a lone kEnd (epsilon).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "rlt/status.h"

namespace rlt::structured {

struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (size_t i = 0; i < bits.size(); ++i) bits[i] |= o.bits[i];
    return *this;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  static ByteSet single(uint8_t b) {
    ByteSet s;
    s.set(b);
    return s;
  }
  friend bool operator==(const ByteSet&, const ByteSet&) = default;
};

struct Element {
  enum class Kind : uint8_t { kBytes, kRule, kEnd };
  Kind kind = Kind::kEnd;
  uint32_t value = 0;  // kBytes: index into Grammar::byte_sets; kRule: the rule's id
};

struct Grammar {
  std::vector<ByteSet> byte_sets;
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: start offsets into `elements`
  std::vector<std::string> rule_names;
  uint32_t root = 0;

  size_t num_rules() const { return alternatives.size(); }
  // The grammar in GBNF-like text (byte sets as [\xNN-\xNN]), for messages and debugging.
  std::string to_string() const;
};

// Builds a Grammar rule by rule. Rules may be declared (by name) before they are defined.
class GrammarBuilder {
 public:
  // The id of the rule called `name`, declaring it when new.
  uint32_t rule(const std::string& name);
  // A fresh rule whose name starts with `base` (helper rules of groups and repetitions); its name
  // holds a '@', which GBNF names cannot, so no user rule can refer to it.
  uint32_t fresh_rule(const std::string& base);
  // Appends one alternative (a sequence of kBytes/kRule elements; kEnd is added) to `rule`.
  void add_alternative(uint32_t rule, const std::vector<Element>& sequence);
  Element bytes(const ByteSet& set);
  static Element ref(uint32_t rule) { return {Element::Kind::kRule, rule}; }
  bool defined(uint32_t rule) const { return !alternatives_[rule].empty(); }
  const std::string& name(uint32_t rule) const { return names_[rule]; }

  // Checks that every referenced rule is defined and that no rule is left-recursive (the matcher
  // expands rules eagerly, so left recursion would not terminate), then returns the grammar.
  Result<Grammar> finish(uint32_t root);

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> named_;  // rules by name (helper rules are not named)
  std::vector<std::vector<std::vector<Element>>> alternatives_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_ids_;
};

}  // namespace rlt::structured
