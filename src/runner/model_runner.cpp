#include "runner/model_runner.h"

#include <fmt/format.h>

namespace rlt::runner {

Status check_can_submit(uint64_t seq, size_t uncollected) {
  if (uncollected < static_cast<size_t>(ModelRunner::kMaxInFlight)) return {};
  return internal_error(fmt::format("batch {} submitted with {} batches uncollected (at most {})",
                                    seq, uncollected, ModelRunner::kMaxInFlight));
}

Status check_collect_order(uint64_t seq, std::optional<uint64_t> oldest) {
  if (oldest && *oldest == seq) return {};
  return internal_error(fmt::format("collect of batch {} but the oldest uncollected batch is {}",
                                    seq, oldest ? std::to_string(*oldest) : std::string("none")));
}

}  // namespace rlt::runner
