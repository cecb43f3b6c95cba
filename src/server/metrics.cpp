#include "server/metrics.h"

#include <fmt/format.h>

namespace rlt::server {
namespace {

const std::vector<double> kTtftBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kItlBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
const std::vector<double> kE2eBounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};

// Label values are server-chosen strings; escape anyway so the format stays parseable.
std::string escape_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string* out, const char* name, const char* type, const char* help) {
  *out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void gauge(std::string* out, const char* name, const char* help, T value, const char* type = "gauge") {
  header(out, name, type, help);
  *out += fmt::format("{} {}\n", name, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string* out) const {
  *out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics() : ttft_(kTtftBounds), itl_(kItlBounds), e2e_(kE2eBounds) {}

void Metrics::count_http(const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++http_[{route, status}];
}

void Metrics::count_finished(const std::string& endpoint, const std::string& reason, int64_t prompt_tokens,
                             int64_t completion_tokens) {
  std::lock_guard lock(mutex_);
  ++finished_[{endpoint, reason}];
  prompt_tokens_ += prompt_tokens;
  completion_tokens_ += completion_tokens;
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}
void Metrics::observe_itl(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}
void Metrics::observe_e2e(double seconds) {
  std::lock_guard lock(mutex_);
  e2e_.observe(seconds);
}

void Metrics::set_engine(const EngineMetrics& engine, int64_t in_flight, int64_t submitted) {
  std::lock_guard lock(mutex_);
  engine_ = engine;
  in_flight_ = in_flight;
  submitted_ = submitted;
}

void Metrics::set_attention_backend(const std::string& name) {
  std::lock_guard lock(mutex_);
  attention_backend_ = name;
}

void Metrics::set_state(bool ready, bool draining) {
  std::lock_guard lock(mutex_);
  ready_ = ready;
  draining_ = draining;
}

EngineMetrics Metrics::engine() const {
  std::lock_guard lock(mutex_);
  return engine_;
}

std::string Metrics::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  gauge(&out, "rlt_ready", "1 when the model is loaded and the server accepts requests", ready_ ? 1 : 0);
  gauge(&out, "rlt_draining", "1 while a shutdown drains in-flight requests", draining_ ? 1 : 0);
  header(&out, "rlt_http_responses_total", "counter", "HTTP responses by route and status code");
  for (const auto& [key, n] : http_)
    out += fmt::format("rlt_http_responses_total{{route=\"{}\",code=\"{}\"}} {}\n", escape_label(key.first), key.second, n);
  header(&out, "rlt_requests_finished_total", "counter",
         "Generated choices by endpoint and outcome (stop, length, cancelled, timeout, error)");
  for (const auto& [key, n] : finished_)
    out += fmt::format("rlt_requests_finished_total{{endpoint=\"{}\",reason=\"{}\"}} {}\n", escape_label(key.first),
                       escape_label(key.second), n);
  gauge(&out, "rlt_prompt_tokens_total", "Prompt tokens of finished choices", prompt_tokens_, "counter");
  gauge(&out, "rlt_completion_tokens_total", "Completion tokens returned to clients", completion_tokens_, "counter");
  gauge(&out, "rlt_generation_tokens_total", "Tokens the engine generated (including ones cut by stop strings or "
        "cancellation)", engine_.generated_tokens, "counter");
  ttft_.render("rlt_time_to_first_token_seconds", "From request arrival to its first generated token", &out);
  itl_.render("rlt_inter_token_latency_seconds", "Between consecutive generated tokens of one request", &out);
  e2e_.render("rlt_e2e_request_latency_seconds", "From request arrival to its last token", &out);
  gauge(&out, "rlt_requests_in_flight", "Engine requests accepted by the server and not finished", in_flight_);
  gauge(&out, "rlt_requests_submitted", "Requests handed to the engine thread, not yet added to the engine", submitted_);
  gauge(&out, "rlt_requests_waiting", "Requests the scheduler has not admitted", engine_.waiting);
  gauge(&out, "rlt_requests_running", "Requests admitted by the scheduler", engine_.running);
  gauge(&out, "rlt_requests_suspended", "Requests preempted to host memory", engine_.suspended);
  gauge(&out, "rlt_kv_cache_used_blocks", "KV pages in use", engine_.kv_used_blocks);
  gauge(&out, "rlt_kv_cache_total_blocks", "KV pages in the pool", engine_.kv_total_blocks);
  gauge(&out, "rlt_kv_cache_usage_ratio", "Share of KV pages in use", engine_.kv_usage);
  gauge(&out, "rlt_prefix_cache_queries_total", "Prompt pages looked up in the prefix cache", engine_.prefix_queries,
        "counter");
  gauge(&out, "rlt_prefix_cache_hits_total", "Prompt pages served from the prefix cache", engine_.prefix_hits, "counter");
  gauge(&out, "rlt_prefix_cache_hit_rate", "prefix_cache_hits / prefix_cache_queries",
        engine_.prefix_queries ? static_cast<double>(engine_.prefix_hits) / static_cast<double>(engine_.prefix_queries)
                               : 0.0);
  gauge(&out, "rlt_loops_total", "Loops run behind generated tokens", engine_.loops_run, "counter");
  gauge(&out, "rlt_mean_loops_per_token", "Mean loops (recurrent depth) per generated token", engine_.mean_loops_per_token);
  gauge(&out, "rlt_preemptions_total", "Requests preempted", engine_.preemptions, "counter");
  gauge(&out, "rlt_engine_batches_total", "Engine batches run", engine_.batches, "counter");
  gauge(&out, "rlt_cuda_graph_replays_total", "Recurrent batches replayed from captured CUDA graphs",
        engine_.cuda_graph_replays, "counter");
  gauge(&out, "rlt_device_sampled_batches_total", "Token batches sampled on the GPU",
        engine_.device_sampled_batches, "counter");
  gauge(&out, "rlt_lookahead_batches_total", "Batches submitted while the previous one ran (--async-scheduling)",
        engine_.lookahead_batches, "counter");
  gauge(&out, "rlt_cpu_threads", "CPU runs: kernel threads of the last batch (fewer while other processes keep cores busy)",
        engine_.cpu_threads);
  gauge(&out, "rlt_reduced_thread_batches_total", "CPU runs: batches run with fewer threads than configured",
        engine_.reduced_thread_batches, "counter");
  gauge(&out, "rlt_constrained_tokens_total", "Tokens sampled under a structured-output constraint",
        engine_.constrained_tokens, "counter");
  gauge(&out, "rlt_structured_mask_seconds_total", "Wall time spent computing structured-output token masks",
        engine_.mask_seconds, "counter");
  // Speculative decoding, under vLLM's names (spec_decode_*).
  gauge(&out, "rlt_spec_decode_num_drafts_total", "Speculative verifications (one per request per verify pass)",
        engine_.spec_verifications, "counter");
  gauge(&out, "rlt_spec_decode_num_draft_tokens_total", "Draft tokens verified", engine_.spec_draft_tokens,
        "counter");
  gauge(&out, "rlt_spec_decode_num_accepted_tokens_total", "Draft tokens accepted", engine_.spec_accepted_tokens,
        "counter");
  gauge(&out, "rlt_spec_decode_num_emitted_tokens_total",
        "Tokens speculative verifications gave (accepted drafts plus the model's own token each)",
        engine_.spec_verified_tokens, "counter");
  header(&out, "rlt_device_seconds_total", "counter", "GPU runs: device time of the batches of each stage");
  for (const auto& [stage, t] : engine_.device_time.named())
    out += fmt::format("rlt_device_seconds_total{{stage=\"{}\"}} {}\n", stage, t.milliseconds / 1e3);
  header(&out, "rlt_attention_backend_info", "gauge", "The selected attention backend (value 1)");
  if (!attention_backend_.empty())
    out += fmt::format("rlt_attention_backend_info{{backend=\"{}\"}} 1\n", escape_label(attention_backend_));
  return out;
}

}  // namespace rlt::server
