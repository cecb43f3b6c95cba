// POST /v1/completions and POST /v1/chat/completions: guards, parsing, prompt building,
// submission, then the JSON response or the SSE stream.
#pragma once

#include <httplib.h>

#include "server/generation_request.h"
#include "server/serving_state.h"

namespace rlt::server {

void handle_generation(ServingState& s, Endpoint endpoint, const httplib::Request& req, httplib::Response& res);

}  // namespace rlt::server
