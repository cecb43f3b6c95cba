#include "structured/utf8_ranges.h"

#include <algorithm>
#include <string>

#include "common/utf8.h"

namespace rlt::structured {
namespace {

int utf8_length(char32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// [lo, hi] within one encoded length and free of surrogates.
void split_same_length(char32_t lo, char32_t hi, std::vector<std::vector<ByteSet>>& out) {
  const int len = utf8_length(lo);
  for (int i = 1; i < len; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  // Now every byte position ranges independently from lo's byte to hi's byte.
  std::string a, b;
  utf8::append(a, lo);
  utf8::append(b, hi);
  std::vector<ByteSet> seq(a.size());
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    seq[k].set_range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  }
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::vector<CodePointRange> merged;
  for (auto& [lo, hi] : ranges) hi = std::min(hi, kMaxCodePoint);
  std::erase_if(ranges, [](const CodePointRange& r) { return r.first > r.second; });
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (!negate) return merged;
  std::vector<CodePointRange> complement;
  char32_t next = 0;
  for (const auto& [lo, hi] : merged) {
    if (lo > next) complement.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
  return complement;
}

std::vector<std::vector<ByteSet>> utf8_sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<std::vector<ByteSet>> out;
  static constexpr char32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (auto [lo, hi] : ranges) {
    // Cut at the encoded-length boundaries and around the surrogates.
    for (char32_t end : kLengthEnds) {
      if (lo > hi) break;
      if (lo > end) continue;
      const char32_t piece_hi = std::min(hi, end);
      if (piece_hi < 0xD800 || lo > 0xDFFF) {
        split_same_length(lo, piece_hi, out);
      } else {
        if (lo < 0xD800) split_same_length(lo, 0xD7FF, out);
        if (piece_hi > 0xDFFF) split_same_length(0xE000, piece_hi, out);
      }
      lo = piece_hi + 1;
    }
  }
  return out;
}

Element char_class_element(GrammarBuilder& builder, const std::vector<CodePointRange>& ranges) {
  const auto sequences = utf8_sequences(ranges);
  ByteSet single;
  std::vector<const std::vector<ByteSet>*> longer;
  for (const auto& s : sequences) {
    if (s.size() == 1) {
      single |= s[0];
    } else {
      longer.push_back(&s);
    }
  }
  if (longer.empty()) return builder.bytes(single);
  const uint32_t rule = builder.fresh_rule("char");
  if (!single.empty()) builder.add_alternative(rule, {builder.bytes(single)});
  for (const auto* s : longer) {
    std::vector<Element> seq;
    for (const ByteSet& b : *s) seq.push_back(builder.bytes(b));
    builder.add_alternative(rule, seq);
  }
  return GrammarBuilder::ref(rule);
}

}  // namespace rlt::structured
