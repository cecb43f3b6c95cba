// Summaries of a load run: throughput, TTFT / ITL / end-to-end percentiles, and the checks
// against the offline reference, as text and JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "load_client.h"
#include "offline_reference.h"

namespace rlt::bench {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  size_t n = 0;
};
Percentiles percentiles(std::vector<double> values);

struct LoadSummary {
  double wall_s = 0;
  int requests = 0, completed = 0, cancelled = 0, failed = 0, retries_429 = 0;
  int64_t tokens = 0;  // tokens received by clients (cancelled requests included)
  Percentiles ttft, itl, e2e;
  std::vector<std::string> problems;  // empty: every check passed
  bool kv_back_to_zero = false;
};

// Checks every result: completed requests match their reference exactly (tokens, depths,
// finish reason, usage, one chunk per token, [DONE]); cancelled ones received a prefix of it.
LoadSummary summarize(const std::vector<ServedResult>& results,
                      const std::vector<Reference>& references, double wall_s);

std::string to_text(const LoadSummary& s);
nlohmann::json to_json(const LoadSummary& s);

}  // namespace rlt::bench
