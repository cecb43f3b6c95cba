// Server metrics in the Prometheus text format (GET /metrics): HTTP responses, finished
// requests, tokens, TTFT / inter-token / end-to-end latency histograms, queue lengths, KV usage,
// prefix-cache hit rate, mean loops per token and the selected attention backend.
//
// Thread safety: every method may be called from any thread (one mutex; updates are rare
// compared with model work).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rlt/engine.h"

namespace rlt::server {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  uint64_t count() const { return count_; }
  // Appends the _bucket/_sum/_count lines of metric `name`.
  void render(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();

  void count_http(const std::string& route, int status);
  // One choice finished as the client saw it: stop, length, cancelled, timeout or error.
  void count_finished(const std::string& endpoint, const std::string& reason, int64_t prompt_tokens,
                      int64_t completion_tokens);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_e2e(double seconds);
  // The engine thread's view after each loop: scheduler queues, KV, loops; plus the server's
  // own queue (submissions not yet admitted) and requests in flight.
  void set_engine(const EngineMetrics& engine, int64_t in_flight, int64_t submitted);
  void set_attention_backend(const std::string& name);
  void set_state(bool ready, bool draining);

  EngineMetrics engine() const;
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  std::map<std::pair<std::string, std::string>, uint64_t> finished_;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  EngineMetrics engine_;
  int64_t in_flight_ = 0;
  int64_t submitted_ = 0;
  std::string attention_backend_;
  bool ready_ = false;
  bool draining_ = false;
};

}  // namespace rlt::server
