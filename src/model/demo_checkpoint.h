// rlt's embedded default model: a small Ouro-architecture checkpoint with deterministic random
// weights and a byte-level tokenizer, created on first use with no download. It exercises every
// code path (GQA, four loops, the exit gate) but its text is gibberish: it has never been trained.
#pragma once

#include <string>

#include "common/status.h"

namespace rlt::model {

// Version tag baked into the folder name; bump it when the demo's contents change.
inline constexpr const char* kDemoModelName = "rlt-demo-ouro-v1";

// Writes config.json, generation_config.json, model.safetensors (bf16), tokenizer.json and
// tokenizer_config.json into `dir` (created if needed). The same call always writes the same bytes.
Status write_demo_checkpoint(const std::string& dir);

// The folder the demo lives in: $RLT_CACHE_DIR, else $XDG_CACHE_HOME/rlt, else ~/.cache/rlt,
// followed by kDemoModelName. Creates it (atomically, via a temporary folder) when missing.
Result<std::string> ensure_demo_checkpoint();

}  // namespace rlt::model
