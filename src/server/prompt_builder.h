// Turns a parsed request into engine inputs: token ids per prompt (tokenized text or the rendered
// chat template) and the final SamplingParams (chat end-of-turn stops, default max_tokens),
// checked against the model so that bad requests fail with 400 before they are queued.
// Runs on HTTP threads: it only reads the immutable ModelContext.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "rlt/sampling_params.h"
#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/model_context.h"

namespace rlt::server {

struct EngineInputs {
  // One engine request (and one choice) each: every prompt `copies` times in a row (n or
  // best_of choices), choice k of prompt k / copies.
  std::vector<std::vector<int32_t>> prompts;
  SamplingParams params;
  // One per engine request when the request gave a seed: the first choice of a prompt takes it,
  // the others a seed derived from it (each choice its own stream); empty otherwise.
  std::vector<std::optional<uint64_t>> seeds;
  int copies = 1;
};

std::optional<ApiError> build_engine_inputs(const GenerationRequest& request, const ModelContext& model,
                                            EngineInputs* out);

}  // namespace rlt::server
