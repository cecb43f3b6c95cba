#include "load_client.h"

#include <chrono>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <thread>

namespace rlt::bench {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string body_of(const std::string& model, const LoadRequest& r) {
  json b{{"model", model}, {"prompt", r.prompt}, {"max_tokens", r.max_tokens}, {"temperature", r.temperature},
         {"exit_threshold", r.exit_threshold}, {"min_loops", 1}, {"ignore_eos", r.ignore_eos}, {"stream", true},
         {"stream_options", {{"include_usage", true}}}};
  if (r.seed) b["seed"] = *r.seed;
  return b.dump();
}

// Applies one SSE payload; returns false to hang up.
bool on_event(const std::string& data, const LoadRequest& r, Clock::time_point start,
              Clock::time_point* last, ServedResult* out) {
  if (data == "[DONE]") {
    out->done_marker = true;
    return true;
  }
  json chunk = json::parse(data, nullptr, false);
  if (chunk.is_discarded()) {
    out->error = "unparseable chunk: " + data.substr(0, 100);
    return false;
  }
  if (chunk.contains("usage") && chunk["usage"].is_object())
    out->usage_completion_tokens = chunk["usage"]["completion_tokens"].get<int64_t>();
  for (const json& c : chunk["choices"]) {
    const auto& ids = c["token_ids"];
    if (!ids.empty()) {
      ++out->token_chunks;
      if (out->tokens.empty()) out->ttft_s = since(start);
      else out->itl_s.push_back(std::chrono::duration<double>(Clock::now() - *last).count());
      *last = Clock::now();
      for (const auto& t : ids) out->tokens.push_back(t.get<int32_t>());
      for (const auto& d : c["exit_depths"]) out->exit_depths.push_back(d.get<int32_t>());
    }
    if (!c["finish_reason"].is_null()) out->finish_reason = c["finish_reason"].get<std::string>();
  }
  if (r.cancel_after > 0 && static_cast<int64_t>(out->tokens.size()) >= r.cancel_after) {
    out->cancelled = true;
    return false;
  }
  return true;
}

ServedResult run_once(const std::string& host, int port, const std::string& model,
                      const LoadRequest& r) {
  ServedResult out;
  out.index = r.index;
  httplib::Client cli(host, port);
  cli.set_tcp_nodelay(true);
  cli.set_read_timeout(120, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body_of(model, r);
  req.set_header("Content-Type", "application/json");
  std::string buffer, error_body;
  const auto start = Clock::now();
  auto last = start;
  req.response_handler = [&](const httplib::Response& res) {
    out.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    if (out.status != 200) {
      error_body.append(data, len);
      return true;
    }
    buffer.append(data, len);
    size_t cut;
    while ((cut = buffer.find("\n\n")) != std::string::npos) {
      std::string event = buffer.substr(0, cut);
      buffer.erase(0, cut + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      if (!on_event(event.substr(6), r, start, &last, &out)) return false;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  out.e2e_s = since(start);
  if (out.cancelled) return out;
  if (!sent && out.error.empty())
    out.error = "transport error: " + httplib::to_string(err) + " after " + std::to_string(out.tokens.size()) +
                " tokens and " + std::to_string(out.e2e_s) + " s";
  if (out.status != 200 && out.error.empty()) out.error = "HTTP " + std::to_string(out.status) + ": " + error_body;
  return out;
}

// Slots are released when the engine has dropped a request; a client that hung up a moment ago
// may still hold one, so a full queue is normal under load. Retry sooner than Retry-After (1 s)
// to keep the pressure on.
constexpr int kMaxRetries = 1500;
constexpr auto kRetryPause = std::chrono::milliseconds(20);

}  // namespace

ServedResult run_request(const std::string& host, int port, const std::string& model,
                         const LoadRequest& r) {
  ServedResult out;
  int retries = 0;
  for (;; ++retries) {
    out = run_once(host, port, model, r);
    if (out.status != 429 || retries == kMaxRetries) break;
    std::this_thread::sleep_for(kRetryPause);
  }
  out.retries = retries;
  return out;
}

}  // namespace rlt::bench
