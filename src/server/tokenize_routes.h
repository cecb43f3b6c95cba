// POST /tokenize and POST /detokenize, as vLLM serves them: the served model's tokenizer (and
// chat template) without running the model, for clients that count or inspect tokens.
#pragma once

#include <httplib.h>

#include "server/serving_state.h"

namespace rlt::server {

void add_tokenize_routes(httplib::Server& svr, ServingState& s);

}  // namespace rlt::server
