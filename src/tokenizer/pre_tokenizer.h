// Pre-tokenizers: split normalized text into the pieces ("words") the model encodes one by one
// (tokenizer.json "pre_tokenizer"), reproducing Hugging Face's split semantics exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace rlt::tok {

// A piece is a byte range of PieceList::text. `at_origin`: the piece starts at byte 0 of the
// user's input (Metaspace's prepend_scheme "first" only prepends there).
struct Piece {
  uint32_t begin;
  uint32_t end;
  bool at_origin;
};

// Pieces over one text buffer. Splitting stages only rewrite `pieces`; transforming stages
// (byte mapping, metaspace) write a new buffer. Kept and reused across calls to avoid
// allocating per word.
struct PieceList {
  std::string text;
  std::vector<Piece> pieces;
  std::vector<Span> spans;  // working memory for stages
  std::string tmp;          // working memory for stages

  std::string_view view(const Piece& p) const {
    return std::string_view(text).substr(p.begin, p.end - p.begin);
  }
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// HF's NormalizedString::split: `matches` are ordered, non-overlapping (possibly empty) spans of
// a string of `len` bytes. Appends the kept, non-empty pieces (relative offsets) to `out`.
void split_by_matches(size_t len, const std::vector<Span>& matches, bool invert,
                      SplitBehavior behavior, std::vector<Span>& out);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces io's pieces with their refinement. `scratch` is working memory.
  virtual void pre_tokenize(PieceList& io, PieceList& scratch) const = 0;
};

enum class PrependScheme { kAlways, kFirst, kNever };

namespace pre_tokenizers {

std::unique_ptr<PreTokenizer> byte_level(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> split(Regex pattern, SplitBehavior behavior, bool invert);
std::unique_ptr<PreTokenizer> digits(bool individual_digits);
std::unique_ptr<PreTokenizer> metaspace(char32_t replacement, PrependScheme scheme, bool split);
std::unique_ptr<PreTokenizer> whitespace();
std::unique_ptr<PreTokenizer> whitespace_split();
std::unique_ptr<PreTokenizer> punctuation(SplitBehavior behavior);
std::unique_ptr<PreTokenizer> bert();
std::unique_ptr<PreTokenizer> char_delimiter(char32_t delimiter);
std::unique_ptr<PreTokenizer> sequence(std::vector<std::unique_ptr<PreTokenizer>> steps);

}  // namespace pre_tokenizers
}  // namespace rlt::tok
