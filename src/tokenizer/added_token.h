// One entry of tokenizer.json "added_tokens", with HF's matching flags.
#pragma once

#include <cstdint>
#include <string>

namespace rlt::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;      // skipped by decode(skip_special_tokens = true)
  bool lstrip = false;       // the match absorbs White_Space on its left
  bool rstrip = false;       // the match absorbs White_Space on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = true;    // matched against normalized text rather than raw input
};

}  // namespace rlt::tok
