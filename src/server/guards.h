// Checks every API request passes before its handler does real work, and the one way errors
// are written, so all routes answer with the same OpenAI-style bodies.
#pragma once

#include <httplib.h>
#include <optional>

#include "server/api_error.h"
#include "server/serving_state.h"

namespace rlt::server {

// 403 for DNS-rebinding and cross-site requests while the server listens on loopback: the Host
// header must name a loopback address, localhost or --host, and a browser's Origin must be the
// page's own (http://<Host>). Not enforced when --host is a non-loopback address.
std::optional<ApiError> check_host_and_origin(const ServingState& s, const httplib::Request& req);
// 401 unless --api-key is unset or `Authorization: Bearer <key>` matches.
std::optional<ApiError> check_auth(const ServingState& s, const httplib::Request& req);
// 503 while loading (Retry-After: 1), draining or after an engine failure.
std::optional<ApiError> check_serving(const ServingState& s);
// 415 unless the body is declared application/json (parameters such as charset allowed).
std::optional<ApiError> check_json_content_type(const httplib::Request& req);

void send_error(httplib::Response& res, const ApiError& error);
void send_json(httplib::Response& res, int status, const std::string& body);

}  // namespace rlt::server
