// OpenAI-style API errors: the HTTP status, the error body
// {"error": {"message", "type", "param", "code"}} and an optional Retry-After.
#pragma once

#include <string>

namespace rlt::server {

struct ApiError {
  int status = 400;
  std::string type;       // OpenAI's error type, e.g. "invalid_request_error"
  std::string code;       // machine-readable reason, e.g. "model_not_found"
  std::string message;    // what is wrong and how to fix it
  std::string param;      // the offending request field, or empty
  int retry_after_s = 0;  // > 0: sent as a Retry-After header

  // The JSON body (always valid UTF-8: invalid bytes in the message are replaced).
  std::string body() const;
};

ApiError invalid_request(std::string message, std::string param = "");           // 400
ApiError unauthorized(std::string message);                                      // 401
ApiError forbidden(std::string message);                                         // 403
ApiError not_found_error(std::string message, std::string code);                 // 404
ApiError method_not_allowed(std::string message);                                // 405
ApiError payload_too_large(std::string message);                                 // 413
ApiError unsupported_media_type(std::string message);                            // 415
ApiError overloaded(std::string message);                                        // 429
ApiError unavailable(std::string code, std::string message, int retry_after_s);  // 503
ApiError timeout_error(std::string message);                                     // 504
ApiError internal_server_error(std::string message);                             // 500

}  // namespace rlt::server
