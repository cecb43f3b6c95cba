#include "tokenizer/normalizer.h"

#include "common/utf8.h"

namespace rlt::tok {

void replace_all(const Regex& pattern, std::string_view content, const std::string& in,
                 std::string& out) {
  out.clear();
  if (in.empty()) return;  // HF reports no match at all in an empty string
  std::vector<Span> matches;
  pattern.find_all(in, matches);
  size_t prev = 0;
  for (const Span& m : matches) {
    out.append(in, prev, m.begin - prev);
    out.append(content);
    prev = m.end;
  }
  out.append(in, prev, std::string::npos);
}

namespace normalizers {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(unicode::NormalForm f) : form_(f) {}
  void normalize(std::string& text, std::string& scratch) const override {
    unicode::normalize(text, form_, scratch);
    text.swap(scratch);
  }

 private:
  unicode::NormalForm form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text, std::string& scratch) const override {
    unicode::lowercase(text, scratch);
    text.swap(scratch);
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text, std::string&) const override {
    size_t begin = 0;
    size_t end = text.size();
    if (left_) {
      while (begin < end) {
        char32_t cp = 0;
        const size_t n = utf8::decode(text, begin, cp);
        if (!unicode::is_whitespace(cp)) break;
        begin += n;
      }
    }
    if (right_) {
      while (end > begin) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        char32_t cp = 0;
        utf8::decode(text, start, cp);
        if (!unicode::is_whitespace(cp)) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  void normalize(std::string& text, std::string& scratch) const override {
    scratch.clear();
    size_t i = 0;
    while (i < text.size()) {
      char32_t cp = 0;
      const size_t n = utf8::decode(text, i, cp);
      if (!unicode::is_mark(cp)) scratch.append(text, i, n);
      i += n;
    }
    text.swap(scratch);
  }
};

class Replace final : public Normalizer {
 public:
  Replace(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text, std::string& scratch) const override {
    replace_all(pattern_, content_, text, scratch);
    text.swap(scratch);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string s) : s_(std::move(s)) {}
  void normalize(std::string& text, std::string&) const override {
    if (!text.empty()) text.insert(0, s_);
  }

 private:
  std::string s_;
};

class Append final : public Normalizer {
 public:
  explicit Append(std::string s) : s_(std::move(s)) {}
  void normalize(std::string& text, std::string&) const override {
    if (!text.empty()) text.append(s_);
  }

 private:
  std::string s_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text, std::string& scratch) const override {
    for (const auto& s : steps_) s->normalize(text, scratch);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> unicode_form(unicode::NormalForm form) {
  return std::make_unique<UnicodeForm>(form);
}
std::unique_ptr<Normalizer> lowercase() {
  return std::make_unique<Lowercase>();
}
std::unique_ptr<Normalizer> strip(bool left, bool right) {
  return std::make_unique<Strip>(left, right);
}
std::unique_ptr<Normalizer> strip_accents() {
  return std::make_unique<StripAccents>();
}
std::unique_ptr<Normalizer> replace(Regex pattern, std::string content) {
  return std::make_unique<Replace>(std::move(pattern), std::move(content));
}
std::unique_ptr<Normalizer> prepend(std::string s) {
  return std::make_unique<Prepend>(std::move(s));
}
std::unique_ptr<Normalizer> append(std::string s) {
  return std::make_unique<Append>(std::move(s));
}
std::unique_ptr<Normalizer> sequence(std::vector<std::unique_ptr<Normalizer>> steps) {
  return std::make_unique<Sequence>(std::move(steps));
}

}  // namespace normalizers
}  // namespace rlt::tok
