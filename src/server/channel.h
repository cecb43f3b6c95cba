// The hand-off of one HTTP request's results from the engine thread to its HTTP thread.
//
// Thread safety: push_*/fail are called only by the engine thread, take() and the accessors
// only by the request's HTTP thread; both sides lock `mutex_`. The engine side never blocks on
// the reader: tokens accumulate until taken (bounded by the request's max_tokens), so a slow
// client cannot stall the engine or other requests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rlt/engine.h"
#include "server/api_error.h"

namespace rlt::server {

using Clock = std::chrono::steady_clock;

// What one choice (one engine request) produced since the last take().
struct TokenBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> exit_depths;       // one per token
  std::vector<TokenLogprobs> logprobs;    // one per token when logprobs were asked for
  std::vector<TokenLogprobs> prompt_logprobs;  // prompt tokens 1..n-1, once, when asked for
  std::vector<std::string> texts;         // one per token: the engine's detokenized text
  std::string final_text;                 // with `finished`: text the detokenizer held back
  bool finished = false;                  // the engine's final output is in this batch
  std::string finish_reason;              // the engine's: "stop", "length" or "abort"
  std::string error;                      // why the engine aborted the request on its own
  int32_t prompt_tokens = 0;

  bool empty() const { return tokens.empty() && !finished; }
};

class Channel {
 public:
  explicit Channel(size_t choices) : pending_(choices), request_ids_(choices) {}

  // --- engine thread ---
  // Appends an engine output (a delta) to choice `choice`'s pending batch.
  void push(size_t choice, RequestOutput output);
  // Ends the request with an error (engine failure, shutdown, refused admission).
  void fail(ApiError error);

  // --- HTTP thread ---
  // Waits until new results, an error or `deadline`. Moves everything pending into `out` (one
  // batch per choice) and returns true when something was taken or an error is set.
  bool take(Clock::time_point deadline, std::vector<TokenBatch>* out);
  std::optional<ApiError> error() const;

  size_t choices() const { return pending_.size(); }
  // Engine request ids, one per choice; written by the worker before the channel is shared.
  std::vector<uint64_t>& request_ids() { return request_ids_; }
  const std::vector<uint64_t>& request_ids() const { return request_ids_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<TokenBatch> pending_;
  std::optional<ApiError> error_;
  bool dirty_ = false;
  std::vector<uint64_t> request_ids_;
};

}  // namespace rlt::server
