#include "common/utf8.h"

namespace rlt::utf8 {
namespace {

// Allowed range of the second byte for a lead byte (Unicode Table 3-7); {0, 0} = invalid lead.
struct SecondRange {
  unsigned char lo, hi;
};

SecondRange second_range(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {0x80, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {0, 0};
}

// Length of the maximal well-formed prefix starting at s[i] (1..4) when it is a complete
// character; otherwise 0 and `bad_len` = bytes the U+FFFD replaces; `truncated` = the input ends
// inside an otherwise valid prefix.
size_t scan(std::string_view s, size_t i, size_t& bad_len, bool& truncated) {
  truncated = false;
  const auto lead = static_cast<unsigned char>(s[i]);
  if (lead < 0x80) return 1;
  const SecondRange r = second_range(lead);
  if (r.lo == 0) {
    bad_len = 1;
    return 0;
  }
  const size_t need = seq_len(lead);
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) {
      bad_len = k;
      truncated = true;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? (b >= r.lo && b <= r.hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      bad_len = k;
      return 0;
    }
  }
  return need;
}

}  // namespace

char32_t last_code_point(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  char32_t cp = 0;
  decode(s, i, cp);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t count_code_points(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path: eight bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    size_t bad = 0;
    bool truncated = false;
    const size_t n = scan(s, i, bad, truncated);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string repair(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = 0;
    bool truncated = false;
    const size_t n = scan(s, i, bad, truncated);
    if (n > 0) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out.append(kReplacementUtf8);
      i += bad;
    }
  }
  return out;
}

void LossyDecoder::push(std::string_view bytes, std::string& out) {
  for (char c : bytes) push_byte(static_cast<unsigned char>(c), out);
}

void LossyDecoder::push_byte(unsigned char b, std::string& out) {
  if (pending_len_ == 0) {
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      return;
    }
    if (second_range(b).lo == 0) {
      out.append(kReplacementUtf8);
      return;
    }
    pending_[0] = b;
    pending_len_ = 1;
    needed_ = seq_len(b);
    return;
  }
  const SecondRange r = second_range(pending_[0]);
  const bool ok = pending_len_ == 1 ? (b >= r.lo && b <= r.hi) : (b >= 0x80 && b <= 0xBF);
  if (!ok) {
    // The collected prefix is a maximal ill-formed subpart: one U+FFFD, then `b` starts afresh.
    out.append(kReplacementUtf8);
    pending_len_ = 0;
    push_byte(b, out);
    return;
  }
  pending_[pending_len_++] = b;
  if (pending_len_ == needed_) {
    out.append(reinterpret_cast<const char*>(pending_), pending_len_);
    pending_len_ = 0;
  }
}

void LossyDecoder::finish(std::string& out) {
  if (pending_len_ > 0) out.append(kReplacementUtf8);
  pending_len_ = 0;
}

}  // namespace rlt::utf8
