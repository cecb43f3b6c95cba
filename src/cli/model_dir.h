// Where the model comes from: --model DIR, or the embedded demo checkpoint (created on demand).
#pragma once

#include <string>

#include "common/status.h"

namespace rlt::cli {

// Returns `requested` when non-empty; otherwise the demo model's folder, creating it if needed.
Result<std::string> resolve_model_dir(const std::string& requested);

// Prints "error: <message>" to stderr and returns exit status 1.
int report_error(const Status& status);

}  // namespace rlt::cli
