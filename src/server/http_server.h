// The OpenAI-compatible HTTP server: binds, loads the model (engine on its own thread), serves
// until asked to stop, then drains. See docs/serving.md.
//
// Thread safety: request_shutdown() may be called from any thread (the CLI's signal thread);
// bind() and run() from the owning thread only.
#pragma once

#include <memory>

#include "rlt/engine.h"
#include "rlt/status.h"
#include "server/server_options.h"

namespace rlt::server {

class Server {
 public:
  Server(ServerOptions options, EngineConfig engine);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listener; with port 0, picks a free port.
  Status bind();
  int port() const;

  // Loads the model and serves until a shutdown completes. /health answers 503 while loading.
  // Returns an error only when loading failed.
  Status run();

  // First call: stop accepting generation requests (503), let in-flight ones finish within
  // --shutdown-timeout, then stop. A second call cuts the drain short.
  void request_shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlt::server
