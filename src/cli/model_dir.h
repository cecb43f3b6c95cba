// Where the model comes from: --model (a Hugging Face folder or a .gguf file), or the embedded
// demo checkpoint (created on demand), or for `rlt chat` the real SmolLM2 model scripts/setup.sh
// fetches into rlt's cache.
#pragma once

#include <optional>
#include <string>

#include "rlt/status.h"

namespace rlt::cli {

// The help text of every --model flag.
inline constexpr const char* kModelFlagHelp =
    "Hugging Face model folder or .gguf file (default: the embedded demo model)";

// Returns `requested` when non-empty; otherwise the demo model's folder, creating it if needed.
Result<std::string> resolve_model_dir(const std::string& requested);

// The file name scripts/setup.sh stores SmolLM2-135M-Instruct under in rlt's cache.
inline constexpr const char* kSmolLM2File = "SmolLM2-135M-Instruct.Q4_1.gguf";
// Its path when it is in the cache.
std::optional<std::string> cached_smollm2();
// How to get it, for messages.
std::string how_to_get_smollm2();

// Prints "error: <message>" to stderr and returns exit status 1.
int report_error(const Status& status);

}  // namespace rlt::cli
