// POST /tokenize, POST /detokenize and GET /tokenizer_info, as vLLM serves them: the served
// model's tokenizer (and chat template) without running the model, for clients that count or
// inspect tokens (lm-eval's remote tokenizer uses all three).
#pragma once

#include <httplib.h>

#include "server/serving_state.h"

namespace rlt::server {

void add_tokenize_routes(httplib::Server& svr, ServingState& s);

}  // namespace rlt::server
