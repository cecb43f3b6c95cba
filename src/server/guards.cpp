#include "server/guards.h"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

#include "common/log.h"

namespace rlt::server {
namespace {

// Compares in time independent of where the strings differ, so the key cannot be guessed byte
// by byte from response times.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string trim_lower(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// "host:port" or "[v6]:port" -> the host part (brackets kept for IPv6).
std::string host_part(const std::string& header) {
  if (!header.empty() && header.front() == '[') return header.substr(0, header.find(']') + 1);
  return header.substr(0, header.find(':'));
}

}  // namespace

std::optional<ApiError> check_host_and_origin(const ServingState& s, const httplib::Request& req) {
  if (!is_loopback_name(s.options.host)) return std::nullopt;  // exposed on purpose: no rebinding guard
  const std::string host_header = req.get_header_value("Host");
  const std::string host = trim_lower(host_part(host_header));
  const std::string bound = trim_lower(s.options.host);
  if (!host_header.empty() && !is_loopback_name(host) && host != bound && host != "[" + bound + "]")
    return forbidden(fmt::format("Host '{}' is not allowed: this server listens on {} and answers loopback names "
                                 "only (start it with --host to expose it)", host_header.substr(0, 100), s.options.host));
  const std::string origin = req.get_header_value("Origin");
  if (!origin.empty() && origin != "http://" + host_header)
    return forbidden(fmt::format("cross-origin request from '{}' refused", origin.substr(0, 100)));
  return std::nullopt;
}

std::optional<ApiError> check_auth(const ServingState& s, const httplib::Request& req) {
  if (s.options.api_key.empty()) return std::nullopt;
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.empty()) return unauthorized("missing API key: send the header 'Authorization: Bearer <key>'");
  if (header.size() < prefix.size() || header.compare(0, prefix.size(), prefix) != 0 ||
      !constant_time_equal(header.substr(prefix.size()), s.options.api_key))
    return unauthorized("incorrect API key");
  return std::nullopt;
}

std::optional<ApiError> check_serving(const ServingState& s) {
  if (s.draining.load()) return unavailable("shutting_down", "the server is shutting down", 0);
  switch (s.worker.state()) {
    case EngineWorker::State::kLoading: return unavailable("not_ready", "the model is still loading; retry shortly", 1);
    case EngineWorker::State::kReady: break;
    case EngineWorker::State::kFailed:
      return unavailable("engine_unavailable", "the engine failed: " + s.worker.failure().message(), 0);
    case EngineWorker::State::kStopped: return unavailable("shutting_down", "the server is shutting down", 0);
  }
  // The engine is up but the tokenizer / template may still be loading.
  if (!s.ready.load(std::memory_order_acquire)) return unavailable("not_ready", "the model is still loading", 1);
  return std::nullopt;
}

std::optional<ApiError> check_json_content_type(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  const std::string media = trim_lower(type.substr(0, type.find(';')));
  if (media == "application/json") return std::nullopt;
  return unsupported_media_type(
      type.empty() ? "missing Content-Type: send the body as JSON with 'Content-Type: application/json'"
                   : fmt::format("Content-Type '{}' is not supported: send JSON with 'Content-Type: application/json'",
                                 type.substr(0, 100)));
}

void send_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  // A client's mistake is the client's to read; a failure of ours must reach the operator too.
  if (error.status == 500) log_error(fmt::format("HTTP 500 ({}): {}", error.code, error.message));
  if (error.retry_after_s > 0) res.set_header("Retry-After", std::to_string(error.retry_after_s));
  send_json(res, error.status, error.body());
}

}  // namespace rlt::server
