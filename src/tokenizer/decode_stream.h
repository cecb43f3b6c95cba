// Streaming detokenization: text for ids as they are generated, one id at a time.
//
// Guarantees, for every id sequence:
//   * every returned piece is valid UTF-8 and never ends inside a character;
//   * the concatenation of all pieces (push()... then flush()) equals
//     Tokenizer::decode(ids, skip_special_tokens), i.e. Hugging Face's decode.
// Each decoder step is run incrementally with the same token boundaries as the batch decode,
// holding back only what a later id could still change: an incomplete UTF-8 sequence (ByteLevel),
// a run of <0xXX> byte tokens (ByteFallback decodes a run as a whole), a trailing run of the
// character Strip removes from the end, a partial Replace pattern.
//
// Not thread-safe: one detokenizer per sequence. The tokenizer must outlive it (it holds a
// shared_ptr).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace rlt::tok {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens);
  ~IncrementalDetokenizer();
  IncrementalDetokenizer(IncrementalDetokenizer&&) noexcept;
  IncrementalDetokenizer& operator=(IncrementalDetokenizer&&) noexcept;

  // Text that became final with `id` (often empty while bytes are held back).
  std::string push(int32_t id);
  // Everything still held back. Ends the sequence: the next push() starts a new one.
  std::string flush();

  class Stage;

 private:
  void reset();
  void run(size_t first_stage, std::vector<std::string>& items, std::string& out);
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace rlt::tok
