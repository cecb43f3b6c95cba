#include "server/reasoning_parser.h"

#include <fmt/format.h>

namespace rlt::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

// How many bytes at the end of `s` could be the start of `tag` (held back until more text comes).
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

Result<ReasoningFormat> parse_reasoning_format(std::string_view name) {
  if (name == "none" || name.empty()) return ReasoningFormat::kNone;
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  return invalid_argument(
      fmt::format("unknown reasoning parser '{}' (accepted: none, deepseek_r1)", name));
}

const char* reasoning_format_name(ReasoningFormat f) {
  switch (f) {
    case ReasoningFormat::kNone:
      return "none";
    case ReasoningFormat::kDeepSeekR1:
      return "deepseek_r1";
  }
  return "?";
}

ReasoningSplitter::ReasoningSplitter(ReasoningFormat format)
    : state_(format == ReasoningFormat::kNone ? State::kContent : State::kStart) {}

ReasoningSplitter::Delta ReasoningSplitter::push(std::string_view text, bool last) {
  Delta out;
  pending_.append(text);
  if (state_ == State::kStart) {
    // A leading <think> is dropped: undecided until the output shows whether it opens with one.
    if (pending_.size() < kThinkOpen.size() && kThinkOpen.substr(0, pending_.size()) == pending_ &&
        !last)
      return out;
    const bool opens = pending_.compare(0, kThinkOpen.size(), kThinkOpen) == 0;
    if (opens) pending_.erase(0, kThinkOpen.size());
    state_ = State::kReasoning;
  }
  if (state_ == State::kReasoning) {
    reasoned_ = true;
    const size_t close = pending_.find(kThinkClose);
    if (close == std::string::npos) {
      const size_t keep = last ? 0 : partial_tag_suffix(pending_, kThinkClose);
      out.reasoning = pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      return out;
    }
    out.reasoning = pending_.substr(0, close);
    pending_.erase(0, close + kThinkClose.size());
    state_ = State::kContent;
  }
  out.content = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace rlt::server
