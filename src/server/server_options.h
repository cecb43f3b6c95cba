// Listener settings and serving limits of `rlt serve`, with their defaults. These are the single
// source of truth for the numbers docs/serving.md documents; cli/cmd_serve.cpp exposes each one
// as a flag.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/reasoning_parser.h"

namespace rlt::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless the operator says otherwise
  int port = 8000;                 // 0: any free port (the chosen one is printed at startup)
  std::string api_key;             // empty: no authentication; else `Authorization: Bearer KEY`
  std::string served_model_name;   // empty: the model folder's name
  // Chat outputs split into reasoning_content and content at <think> ... </think>
  // (reasoning_parser.h; vLLM's --reasoning-parser); kNone: all content.
  ReasoningFormat reasoning_parser = ReasoningFormat::kNone;

  // Engine requests (one per prompt) queued or running at once; beyond it: 429 + Retry-After.
  // Separate from the engine's --max-num-seqs, which bounds the requests in one batch; 0: room for
  // two full batches, at least 64 and at most 4,096 (64 on the CPU, 512 with a GPU's 256-row
  // batches), so a batch refills from the queue.
  int max_requests = 0;
  int max_prompts_per_request = 16;         // prompts in one /v1/completions body
  size_t max_body_bytes = size_t{1} << 20;  // larger bodies: 413
  double request_timeout_s = 300.0;  // until the whole response (non-streaming) or first token
  double write_timeout_s = 10.0;     // one socket write to a client; slower readers are dropped
  double shutdown_timeout_s = 30.0;  // how long SIGINT/SIGTERM wait for in-flight requests
  int http_threads = 0;              // connection threads; 0: 2 * max_requests + 8

  // Test hooks (hidden flags): make loading and engine steps slow enough to observe the
  // not-ready, queue-full, timeout and drain paths deterministically.
  double debug_load_delay_s = 0.0;
  double debug_step_delay_s = 0.0;

  // These options with max_requests 0 made concrete from the engine's batch width (max_num_seqs as
  // the engine resolves it: rlt::with_device_defaults).
  ServerOptions resolved(int engine_max_num_seqs) const {
    ServerOptions o = *this;
    if (o.max_requests <= 0) {
      o.max_requests =
          static_cast<int>(std::clamp<int64_t>(2 * int64_t{engine_max_num_seqs}, 64, 4096));
    }
    return o;
  }
  int resolved_http_threads() const {
    return http_threads > 0 ? http_threads : 2 * max_requests + 8;
  }
};

}  // namespace rlt::server
