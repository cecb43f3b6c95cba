// The read-only routes: GET / (chat page), /health, /v1/models, /v1/attention, /metrics.
#pragma once

#include <httplib.h>

#include "server/serving_state.h"

namespace rlt::server {

void add_info_routes(httplib::Server& svr, ServingState& s);

// The browser chat page (chat_page.html, embedded at build time).
const char* chat_page_html();

}  // namespace rlt::server
