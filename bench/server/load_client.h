// One streaming /v1/completions request as the load test's client sees it: every SSE chunk
// parsed, token ids and exit depths collected, TTFT and inter-token latencies timed, and an
// optional hang-up after some tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "load_workload.h"

namespace rlt::bench {

struct ServedResult {
  int index = 0;
  int status = 0;               // HTTP status (0: no response)
  int retries = 0;              // 429 answers retried
  bool cancelled = false;       // the client hung up on purpose
  bool done_marker = false;     // saw data: [DONE]
  std::string error;            // why the request failed, if it did
  std::vector<int32_t> tokens;  // from the token_ids extension, in arrival order
  std::vector<int32_t> exit_depths;
  std::string finish_reason;
  int64_t usage_completion_tokens = -1;
  int64_t token_chunks = 0;
  double ttft_s = 0.0;
  std::vector<double> itl_s;    // between consecutive token chunks
  double e2e_s = 0.0;
};

// Retries 429 (queue full) after a short pause, up to about 30 s; other errors end the request.
ServedResult run_request(const std::string& host, int port, const std::string& model,
                         const LoadRequest& request);

}  // namespace rlt::bench
