// Turns one choice's engine outputs into what the client sees: the engine's incremental text
// (detokenized once, by the engine: never split inside a UTF-8 character, special tokens hidden)
// with stop strings applied, and the per-token record (ids, exit depths, logprobs) the response
// formats need. The same decoder serves the
// streaming and the non-streaming paths, so both return identical text.
//
// Not thread-safe: one decoder per choice, used by its HTTP thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/channel.h"
#include "server/stop_matcher.h"

namespace rlt::server {

// One generated token as the client sees it.
struct TokenPiece {
  int32_t token = -1;  // -1: no new token (the engine finished without one)
  int32_t exit_depth = 0;
  std::optional<TokenLogprobs> logprobs;
  std::string text;           // text released with this token (may be empty)
  std::string reasoning;      // chat with a reasoning parser: thinking released with it (text: the answer's part)
  size_t text_offset = 0;     // where `text` starts in the choice's whole output (bytes)
  bool last = false;          // the choice ends with this piece
  std::string finish_reason;  // on the last piece: "stop", "length" or "abort"
};

class ChoiceDecoder {
 public:
  // `prompt_only`: the request generates nothing (max_tokens 0 with echo): the engine's tokens
  // are dropped and the choice ends with "length" when the engine's request does.
  explicit ChoiceDecoder(std::vector<std::string> stops, bool prompt_only = false);

  // One piece per token until the choice ends; tokens after a stop string are dropped.
  std::vector<TokenPiece> consume(const TokenBatch& batch);

  bool finished() const { return finished_; }
  // A stop string ended the choice while its engine request may still run: cancel it.
  bool stopped_by_string() const { return matcher_.stopped(); }
  const std::string& finish_reason() const { return finish_reason_; }
  // Why the engine aborted the choice on its own (finish reason "abort"); empty otherwise.
  const std::string& engine_error() const { return engine_error_; }
  int64_t prompt_tokens() const { return prompt_tokens_; }
  int64_t completion_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& text() const { return text_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& exit_depths() const { return exit_depths_; }
  const std::vector<TokenLogprobs>& logprobs() const { return logprobs_; }
  const std::vector<size_t>& text_offsets() const { return text_offsets_; }  // one per token
  // Prompt tokens 1..n-1, scored, when the request asked for them (with its first token).
  const std::vector<TokenLogprobs>& prompt_logprobs() const { return prompt_logprobs_; }

 private:
  StopMatcher matcher_;
  bool finished_ = false;
  std::string finish_reason_;
  std::string engine_error_;
  int64_t prompt_tokens_ = 0;
  std::string text_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> exit_depths_;
  std::vector<TokenLogprobs> logprobs_;
  std::vector<size_t> text_offsets_;
  std::vector<TokenLogprobs> prompt_logprobs_;
  bool prompt_only_ = false;
};

}  // namespace rlt::server
