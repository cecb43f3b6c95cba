// Stop strings over streamed text. Text is released as soon as no stop string can begin in it;
// a tail that could still grow into a stop string is held back, so a stop spanning several
// tokens is found and never shown. Released text never ends inside a UTF-8 character when the
// input pieces are valid UTF-8: a held tail always starts where a stop string starts.
//
// Not thread-safe: one matcher per choice.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlt::server {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // text that became final
    bool stopped = false;  // a stop string matched; `text` ends right before it
  };
  // Adds `piece`; after a match, further input is ignored.
  Result feed(std::string_view piece);
  // The held-back tail (no more input will come).
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace rlt::server
