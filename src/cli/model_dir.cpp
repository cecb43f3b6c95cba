#include "cli/model_dir.h"

#include <cstdio>

#include "common/log.h"
#include "model/demo_checkpoint.h"

namespace rlt::cli {

Result<std::string> resolve_model_dir(const std::string& requested) {
  if (!requested.empty()) return requested;
  auto dir = model::ensure_demo_checkpoint();
  if (dir.ok()) log_info("no --model given: using the embedded demo model at " + *dir);
  return dir;
}

int report_error(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

}  // namespace rlt::cli
