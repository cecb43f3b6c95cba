// One generation request after it was queued: drains its Channel into one ChoiceDecoder per
// choice, cancels engine work nobody will read (stop strings, disconnects, timeouts) and reports
// each choice's outcome to the metrics when it ends.
//
// Not thread-safe: owned by the request's HTTP thread (the streaming path hands it from the
// handler to httplib's content provider on the same thread).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_error.h"
#include "server/channel.h"
#include "server/choice_decoder.h"
#include "server/connection_probe.h"
#include "server/engine_worker.h"
#include "server/generation_request.h"
#include "server/metrics.h"
#include "server/model_context.h"

namespace rlt::server {

class GenerationSession {
 public:
  GenerationSession(EngineWorker& worker, Metrics& metrics, const GenerationRequest& request,
                    std::shared_ptr<Channel> channel, ConnectionProbe probe);
  ~GenerationSession();
  GenerationSession(const GenerationSession&) = delete;
  GenerationSession& operator=(const GenerationSession&) = delete;

  struct Event {
    size_t choice = 0;
    TokenPiece piece;
  };
  enum class Poll {
    kProgress,      // new events
    kIdle,          // nothing new within the slice
    kDone,          // every choice finished (events may hold the last pieces)
    kError,         // error() is set
    kTimeout,       // the deadline passed
    kDisconnected,  // the client went away
  };
  // Waits up to `slice` (and never past the deadline) for new pieces.
  Poll poll(std::chrono::milliseconds slice, std::vector<Event>* events);

  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  // Gives up on unfinished choices (client gone, timeout, mid-stream failure): cancels their
  // engine requests and records `reason` as their outcome.
  void abandon(const std::string& reason);

  const std::optional<ApiError>& error() const { return error_; }
  const std::vector<ChoiceDecoder>& choices() const { return decoders_; }
  bool all_finished() const;
  int64_t prompt_tokens() const;  // each prompt once, however many choices it has
  int64_t completion_tokens() const;

 private:
  // Cancels these choices' engine requests (each once).
  void cancel(const std::vector<size_t>& choices);

  EngineWorker& worker_;
  Metrics& metrics_;
  std::string endpoint_;
  std::shared_ptr<Channel> channel_;
  ConnectionProbe probe_;
  std::vector<ChoiceDecoder> decoders_;
  std::vector<bool> cancelled_;
  size_t copies_ = 1;  // consecutive choices of one prompt (n, best_of)
  std::optional<ApiError> error_;
  std::string abandon_reason_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point next_probe_;
};

}  // namespace rlt::server
