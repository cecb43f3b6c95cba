#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace rlt::server {

std::string ApiError::body() const {
  nlohmann::ordered_json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(param);
  e["code"] = code;
  nlohmann::ordered_json j;
  j["error"] = std::move(e);
  // Messages may quote client input; never let a stray byte turn an error into a crash.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {
ApiError make(int status, std::string type, std::string code, std::string message,
              std::string param = "", int retry_after_s = 0) {
  return ApiError{status,           std::move(type), std::move(code), std::move(message),
                  std::move(param), retry_after_s};
}
}  // namespace

ApiError invalid_request(std::string message, std::string param) {
  return make(400, "invalid_request_error", "invalid_request", std::move(message),
              std::move(param));
}
ApiError unauthorized(std::string message) {
  return make(401, "authentication_error", "invalid_api_key", std::move(message));
}
ApiError forbidden(std::string message) {
  return make(403, "forbidden", "forbidden", std::move(message));
}
ApiError not_found_error(std::string message, std::string code) {
  return make(404, "invalid_request_error", std::move(code), std::move(message));
}
ApiError method_not_allowed(std::string message) {
  return make(405, "invalid_request_error", "method_not_allowed", std::move(message));
}
ApiError payload_too_large(std::string message) {
  return make(413, "invalid_request_error", "request_too_large", std::move(message));
}
ApiError unsupported_media_type(std::string message) {
  return make(415, "invalid_request_error", "unsupported_media_type", std::move(message));
}
ApiError overloaded(std::string message) {
  return make(429, "rate_limit_error", "overloaded", std::move(message), "", 1);
}
ApiError unavailable(std::string code, std::string message, int retry_after_s) {
  return make(503, "service_unavailable", std::move(code), std::move(message), "", retry_after_s);
}
ApiError timeout_error(std::string message) {
  return make(504, "timeout", "timeout", std::move(message));
}
ApiError internal_server_error(std::string message) {
  return make(500, "internal_error", "internal_error", std::move(message));
}

}  // namespace rlt::server
