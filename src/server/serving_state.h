// State shared by the route handlers of one server: options, metrics, the engine worker, the
// model context and the lifecycle flags.
//
// Thread safety: `model` is written once before `ready` is set (release) and read only after
// `ready` was seen (acquire); the flags are atomics; Metrics and EngineWorker are thread-safe.
#pragma once

#include <atomic>
#include <memory>

#include "server/engine_worker.h"
#include "server/metrics.h"
#include "server/model_context.h"
#include "server/server_options.h"

namespace rlt::server {

struct ServingState {
  ServingState(ServerOptions o, EngineWorker::Options w) : options(std::move(o)), worker(std::move(w), &metrics) {}

  const ServerOptions options;
  Metrics metrics;
  EngineWorker worker;
  std::unique_ptr<const ModelContext> model;  // set before `ready`
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  std::atomic<int> open_sessions{0};  // generation requests not yet fully answered
};

// Counts a generation request as open for the drain while it lives.
class OpenSession {
 public:
  explicit OpenSession(ServingState& s) : s_(s) { s_.open_sessions.fetch_add(1); }
  ~OpenSession() { s_.open_sessions.fetch_sub(1); }
  OpenSession(const OpenSession&) = delete;
  OpenSession& operator=(const OpenSession&) = delete;

 private:
  ServingState& s_;
};

}  // namespace rlt::server
