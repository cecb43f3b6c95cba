// The same requests run offline through an in-process Engine (no HTTP): what the server must
// return token for token. Valid because seeded and greedy outputs do not depend on which other
// requests share a batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "load_workload.h"
#include "rlt/engine.h"
#include "rlt/status.h"

namespace rlt::bench {

struct Reference {
  std::vector<int32_t> tokens;
  std::vector<int32_t> exit_depths;
  std::string finish_reason;
};

Result<std::vector<Reference>> run_offline(const EngineConfig& config, const std::vector<LoadRequest>& requests);

}  // namespace rlt::bench
