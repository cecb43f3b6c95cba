#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace rlt::tok {

void split_by_matches(size_t len, const std::vector<Span>& matches, bool invert,
                      SplitBehavior behavior, std::vector<Span>& out) {
  // 1. Cover the whole string with (span, is_match), as HF's Pattern::find_matches does.
  struct Split {
    Span span;
    bool is_match;
  };
  thread_local std::vector<Split> splits;
  splits.clear();
  if (len == 0) {
    splits.push_back({{0, 0}, false});
  } else {
    size_t prev = 0;
    for (const Span& m : matches) {
      if (prev != m.begin) splits.push_back({{prev, m.begin}, false});
      splits.push_back({m, true});
      prev = m.end;
    }
    if (prev != len) splits.push_back({{prev, len}, false});
  }
  if (invert) {
    for (Split& s : splits) s.is_match = !s.is_match;
  }

  // 2. Apply the delimiter behavior (a literal port of NormalizedString::split).
  const size_t first_out = out.size();
  auto emit = [&](Span s) { out.push_back(s); };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Split& s : splits) emit(s.span);
      break;
    case SplitBehavior::kRemoved:
      for (const Split& s : splits) {
        if (!s.is_match) emit(s.span);
      }
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Split& s : splits) {
        if (s.is_match == previous_match && out.size() > first_out) {
          out.back().end = s.span.end;
        } else {
          emit(s.span);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Split& s : splits) {
        if (s.is_match && !previous_match && out.size() > first_out) {
          out.back().end = s.span.end;
        } else {
          emit(s.span);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (size_t k = splits.size(); k-- > 0;) {
        const Split& s = splits[k];
        if (s.is_match && !previous_match && out.size() > first_out) {
          out.back().begin = s.span.begin;
        } else {
          emit(s.span);
        }
        previous_match = s.is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first_out), out.end());
      break;
    }
  }
  // 3. Empty pieces are dropped (PreTokenizedString::split filters them).
  size_t w = first_out;
  for (size_t r = first_out; r < out.size(); ++r) {
    if (out[r].end > out[r].begin) out[w++] = out[r];
  }
  out.resize(w);
}

namespace pre_tokenizers {
namespace {

// Splits every piece of `io` in place (same text buffer) using `find` to list matches.
template <typename FindMatches>
void split_pieces(PieceList& io, PieceList& scratch, bool invert, SplitBehavior behavior,
                  FindMatches&& find) {
  scratch.pieces.clear();
  std::vector<Span>& matches = io.spans;
  thread_local std::vector<Span> parts;
  for (const Piece& p : io.pieces) {
    matches.clear();
    parts.clear();
    const std::string_view s = io.view(p);
    find(s, matches);
    split_by_matches(s.size(), matches, invert, behavior, parts);
    for (const Span& part : parts) {
      scratch.pieces.push_back({static_cast<uint32_t>(p.begin + part.begin),
                                static_cast<uint32_t>(p.begin + part.end),
                                p.at_origin && part.begin == 0});
    }
  }
  io.pieces.swap(scratch.pieces);
}

// Each character satisfying `pred` is its own match (HF's `impl Pattern for Fn(char) -> bool`).
template <typename Pred>
auto char_matcher(Pred pred) {
  return [pred](std::string_view s, std::vector<Span>& out) {
    size_t i = 0;
    while (i < s.size()) {
      char32_t cp = 0;
      const size_t n = utf8::decode(s, i, cp);
      if (pred(cp)) out.push_back({i, i + n});
      i += n;
    }
  };
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, std::optional<Regex> re)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex), re_(std::move(re)) {}

  void pre_tokenize(PieceList& io, PieceList& scratch) const override {
    scratch.text.clear();
    scratch.pieces.clear();
    std::string& word = io.tmp;
    std::vector<Span>& matches = io.spans;
    thread_local std::vector<Span> parts;
    for (const Piece& p : io.pieces) {
      std::string_view s = io.view(p);
      if (add_prefix_space_ && (s.empty() || s[0] != ' ')) {
        word.clear();
        word.push_back(' ');
        word.append(s);
        s = word;
      }
      parts.clear();
      if (use_regex_) {
        matches.clear();
        re_->find_all(s, matches);
        split_by_matches(s.size(), matches, false, SplitBehavior::kIsolated, parts);
      } else if (!s.empty()) {
        parts.push_back({0, s.size()});
      }
      for (const Span& part : parts) {
        const auto begin = static_cast<uint32_t>(scratch.text.size());
        byte_level::map_bytes(s.substr(part.begin, part.end - part.begin), scratch.text);
        scratch.pieces.push_back(
            {begin, static_cast<uint32_t>(scratch.text.size()), p.at_origin && part.begin == 0});
      }
    }
    std::swap(io.text, scratch.text);
    io.pieces.swap(scratch.pieces);
  }

 private:
  bool add_prefix_space_;
  bool use_regex_;
  std::optional<Regex> re_;
};

class Split final : public PreTokenizer {
 public:
  Split(Regex re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(PieceList& io, PieceList& scratch) const override {
    split_pieces(io, scratch, invert_, behavior_,
                 [this](std::string_view s, std::vector<Span>& out) { re_.find_all(s, out); });
  }

 private:
  Regex re_;
  SplitBehavior behavior_;
  bool invert_;
};

class CharSplit final : public PreTokenizer {
 public:
  CharSplit(std::function<bool(char32_t)> pred, SplitBehavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  void pre_tokenize(PieceList& io, PieceList& scratch) const override {
    split_pieces(io, scratch, false, behavior_, char_matcher(pred_));
  }

 private:
  std::function<bool(char32_t)> pred_;
  SplitBehavior behavior_;
};

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : rep_(utf8::encode(replacement)), scheme_(scheme), split_(split) {}

  void pre_tokenize(PieceList& io, PieceList& scratch) const override {
    scratch.text.clear();
    scratch.pieces.clear();
    std::vector<Span>& matches = io.spans;
    thread_local std::vector<Span> parts;
    for (const Piece& p : io.pieces) {
      const std::string_view s = io.view(p);
      const auto begin = static_cast<uint32_t>(scratch.text.size());
      std::string& out = scratch.text;
      const bool starts_with_rep = s.substr(0, 1) == " " || s.substr(0, rep_.size()) == rep_;
      const bool prepend = !starts_with_rep && (scheme_ == PrependScheme::kAlways ||
                                                (scheme_ == PrependScheme::kFirst && p.at_origin));
      if (prepend && !s.empty()) out.append(rep_);
      for (char c : s) {
        if (c == ' ') {
          out.append(rep_);
        } else {
          out.push_back(c);
        }
      }
      const auto end = static_cast<uint32_t>(out.size());
      if (!split_) {
        if (end > begin) scratch.pieces.push_back({begin, end, p.at_origin});
        continue;
      }
      // Split on the replacement character, which joins the piece that follows it.
      const std::string_view w = std::string_view(out).substr(begin, end - begin);
      matches.clear();
      for (size_t pos = w.find(rep_); pos != std::string_view::npos; pos = w.find(rep_, pos)) {
        matches.push_back({pos, pos + rep_.size()});
        pos += rep_.size();
      }
      parts.clear();
      split_by_matches(w.size(), matches, false, SplitBehavior::kMergedWithNext, parts);
      for (const Span& part : parts) {
        scratch.pieces.push_back({static_cast<uint32_t>(begin + part.begin),
                                  static_cast<uint32_t>(begin + part.end),
                                  p.at_origin && part.begin == 0});
      }
    }
    std::swap(io.text, scratch.text);
    io.pieces.swap(scratch.pieces);
  }

 private:
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(PieceList& io, PieceList& scratch) const override {
    for (const auto& s : steps_) s->pre_tokenize(io, scratch);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool is_bert_punctuation(char32_t c) {
  const bool ascii_punct = (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
                           (c >= 123 && c <= 126);
  return ascii_punct || unicode::is_punctuation(c);
}

}  // namespace

std::unique_ptr<PreTokenizer> byte_level(bool add_prefix_space, bool use_regex) {
  std::optional<Regex> re;
  if (use_regex) {
    auto compiled = Regex::compile(byte_level::kGpt2Pattern);
    if (compiled.ok()) re = std::move(compiled).value();
    // The built-in pattern always compiles; fall back to no splitting rather than crash.
    use_regex = re.has_value();
  }
  return std::make_unique<ByteLevel>(add_prefix_space, use_regex, std::move(re));
}

std::unique_ptr<PreTokenizer> split(Regex pattern, SplitBehavior behavior, bool invert) {
  return std::make_unique<Split>(std::move(pattern), behavior, invert);
}

std::unique_ptr<PreTokenizer> digits(bool individual_digits) {
  return std::make_unique<CharSplit>(
      [](char32_t c) { return unicode::is_numeric(c); },
      individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
}

std::unique_ptr<PreTokenizer> metaspace(char32_t replacement, PrependScheme scheme, bool split) {
  return std::make_unique<Metaspace>(replacement, scheme, split);
}

std::unique_ptr<PreTokenizer> whitespace() {
  // HF uses the Rust regex \w+|[^\w\s]+ (UTS #18 \w, White_Space \s), keeping the matches.
  static constexpr std::string_view kWord = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}";
  std::string p = "[";
  p += kWord;
  p += "]+|[^";
  p += kWord;
  p += "\\p{White_Space}]+";
  auto re = Regex::compile_raw(p);
  return std::make_unique<Split>(std::move(re).value(), SplitBehavior::kRemoved, true);
}

std::unique_ptr<PreTokenizer> whitespace_split() {
  return std::make_unique<CharSplit>([](char32_t c) { return unicode::is_whitespace(c); },
                                     SplitBehavior::kRemoved);
}

std::unique_ptr<PreTokenizer> punctuation(SplitBehavior behavior) {
  return std::make_unique<CharSplit>(is_bert_punctuation, behavior);
}

std::unique_ptr<PreTokenizer> bert() {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  steps.push_back(whitespace_split());
  steps.push_back(punctuation(SplitBehavior::kIsolated));
  return sequence(std::move(steps));
}

std::unique_ptr<PreTokenizer> char_delimiter(char32_t delimiter) {
  return std::make_unique<CharSplit>([delimiter](char32_t c) { return c == delimiter; },
                                     SplitBehavior::kRemoved);
}

std::unique_ptr<PreTokenizer> sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) {
  return std::make_unique<Sequence>(std::move(steps));
}

}  // namespace pre_tokenizers
}  // namespace rlt::tok
