#include "server/generation_session.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlt::server {
namespace {

// How often a waiting request checks whether its client is still there (one recv syscall).
constexpr auto kProbeInterval = std::chrono::milliseconds(50);

}  // namespace

GenerationSession::GenerationSession(EngineWorker& worker, Metrics& metrics,
                                     const GenerationRequest& request,
                                     std::shared_ptr<Channel> channel, ConnectionProbe probe)
    : worker_(worker),
      metrics_(metrics),
      endpoint_(request.endpoint == Endpoint::kChat ? "chat" : "completions"),
      channel_(std::move(channel)),
      probe_(probe),
      cancelled_(channel_->choices(), false),
      copies_(static_cast<size_t>(std::max(request.copies(), 1))) {
  decoders_.reserve(channel_->choices());
  for (size_t i = 0; i < channel_->choices(); ++i) decoders_.emplace_back(request.stop, request.prompt_only());
}

GenerationSession::~GenerationSession() {
  // Whatever is unfinished now is abandoned: free its KV rather than let it run to max_tokens.
  if (!all_finished() && abandon_reason_.empty()) abandon(error_ ? "error" : "cancelled");
  for (const ChoiceDecoder& d : decoders_) {
    // An abort the client sees finished is the engine's own failure, never a cancellation.
    const std::string reason = !d.finished() ? abandon_reason_ : d.finish_reason() == "abort" ? "error" : d.finish_reason();
    metrics_.count_finished(endpoint_, reason, d.prompt_tokens(), d.completion_tokens());
  }
}

bool GenerationSession::all_finished() const {
  for (const ChoiceDecoder& d : decoders_)
    if (!d.finished()) return false;
  return true;
}

int64_t GenerationSession::prompt_tokens() const {
  int64_t n = 0;
  for (size_t i = 0; i < decoders_.size(); i += copies_) n += decoders_[i].prompt_tokens();
  return n;
}

int64_t GenerationSession::completion_tokens() const {
  int64_t n = 0;
  for (const ChoiceDecoder& d : decoders_) n += d.completion_tokens();
  return n;
}

void GenerationSession::cancel(const std::vector<size_t>& choices) {
  std::vector<uint64_t> ids;
  for (size_t i : choices) {
    if (cancelled_[i]) continue;
    ids.push_back(channel_->request_ids()[i]);
    cancelled_[i] = true;
  }
  if (!ids.empty()) worker_.cancel(ids);
}

void GenerationSession::abandon(const std::string& reason) {
  if (abandon_reason_.empty()) abandon_reason_ = reason;
  // Choices a stop string ended are finished for the client but may still run in the engine.
  std::vector<size_t> running;
  for (size_t i = 0; i < decoders_.size(); ++i)
    if (!decoders_[i].finished() || decoders_[i].stopped_by_string()) running.push_back(i);
  cancel(running);
}

GenerationSession::Poll GenerationSession::poll(std::chrono::milliseconds slice, std::vector<Event>* events) {
  events->clear();
  if (error_) return Poll::kError;
  const auto now = Clock::now();
  if (now >= deadline_) return Poll::kTimeout;
  const auto until = deadline_ - now < slice ? deadline_ : now + slice;
  std::vector<TokenBatch> batches;
  const bool got = channel_->take(until, &batches);
  if (auto e = channel_->error()) {
    error_ = std::move(e);
    return Poll::kError;
  }
  if (got) {
    for (size_t i = 0; i < batches.size(); ++i) {
      if (batches[i].empty()) continue;
      ChoiceDecoder& d = decoders_[i];
      const bool was_finished = d.finished();
      for (TokenPiece& p : d.consume(batches[i])) events->push_back({i, std::move(p)});
      if (!was_finished && d.finished() && d.finish_reason() == "abort") {
        // Our own cancels are never read (their choices finished first), so this abort is the
        // engine's own: a failed batch or a broken logits row.
        const std::string why = d.engine_error().empty() ? "no reason given" : d.engine_error();
        error_ = internal_server_error(fmt::format("the engine aborted choice {} (engine request {}): {}", i,
                                                   channel_->request_ids()[i], why));
        return Poll::kError;
      }
      // A stop string ended this choice early: its engine request is still running; the other
      // choices go on.
      if (d.stopped_by_string()) cancel({i});
    }
  }
  if (all_finished()) return Poll::kDone;
  // Tokens may arrive on every poll, so the client is checked on a clock, not only when idle.
  if (Clock::now() >= next_probe_) {
    next_probe_ = Clock::now() + kProbeInterval;
    if (probe_.peer_closed()) return Poll::kDisconnected;
  }
  if (!events->empty()) return Poll::kProgress;
  if (Clock::now() >= deadline_) return Poll::kTimeout;
  return Poll::kIdle;
}

}  // namespace rlt::server
