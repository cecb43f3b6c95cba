// Reasoning models (Ouro-Thinking, Nanbeige4, DeepSeek-R1, Qwen3 thinking) think in a
// <think> ... </think> block before they answer. With `rlt serve --reasoning-parser deepseek_r1`
// a chat output is split there as vLLM's parser of that name splits it: the thinking goes to the
// message's `reasoning_content` (streamed as `delta.reasoning_content`), the answer to `content`
// (where tool calls are then parsed). The output starts inside the block (the chat template opens
// it; a leading <think> is dropped all the same): reasoning until the first </think>, all
// reasoning if the block never closes.
//
// Fed piece by piece (streaming) or whole: a tag split across pieces is held back until it can be
// told apart from text, so the concatenated deltas equal the whole-text split.
#pragma once

#include <string>
#include <string_view>

#include "rlt/status.h"

namespace rlt::server {

enum class ReasoningFormat { kNone, kDeepSeekR1 };

// "none", "deepseek_r1".
Result<ReasoningFormat> parse_reasoning_format(std::string_view name);
const char* reasoning_format_name(ReasoningFormat f);

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(ReasoningFormat format = ReasoningFormat::kNone);

  struct Delta {
    std::string reasoning;  // thinking released by this piece
    std::string content;    // answer released by this piece
  };
  // The next piece of output; `last`: the output ends with it (anything held back is released).
  Delta push(std::string_view text, bool last = false);
  // Whether any reasoning has been seen (the message then carries reasoning_content).
  bool reasoned() const { return reasoned_; }

 private:
  enum class State { kStart, kReasoning, kContent };
  State state_;
  std::string pending_;  // text whose place is not decided yet (a possible partial tag)
  bool reasoned_ = false;
};

}  // namespace rlt::server
