// KVCacheManager: the written-state contract (record, query, finalize, import).
#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace rlt::kv {

Status KVCacheManager::check_writable_range(const Allocation& a, int64_t start, int64_t end) const {
  const int32_t backed = a.backed_tokens(block_size());
  if (start < 0 || end < start || end > backed) {
    return out_of_range(fmt::format(
        "request {}: positions [{}, {}) outside the {} backed tokens ({} pages, capacity {})", a.id,
        start, end, backed, a.pages, a.capacity_tokens));
  }
  if (start == end) return {};
  // Pages shared through the prefix cache are read by other requests: a write there would change
  // their history under them. Only leading pages are ever shared: the hit taken at admission and
  // the pages this request published.
  const int32_t read_only_pages = std::max(a.cached_pages, a.published_pages);
  const auto first_page = static_cast<int32_t>(start / block_size());
  if (first_page < read_only_pages) {
    return failed_precondition(fmt::format(
        "request {}: positions [{}, {}) overlap page {}, which is shared through the prefix cache "
        "(the first {} tokens are read-only)",
        a.id, start, end, first_page, read_only_pages * block_size()));
  }
  return {};
}

Status KVCacheManager::record_written(RequestId id, int32_t depth, int32_t start, int32_t count) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  RLT_ASSIGN_OR_RETURN(int32_t plane, plane_of_depth(depth));
  if (a->release_pending) {
    return failed_precondition(fmt::format("request {} is scheduled for release", id));
  }
  if (count < 0) return invalid_argument(fmt::format("request {}: count {} < 0", id, count));
  RLT_RETURN_IF_ERROR(check_writable_range(*a, start, int64_t{start} + count));
  a->written[plane].set_range(start, start + count);
  publish_ready_pages(*a);
  return {};
}

Status KVCacheManager::record_written_all_depths(RequestId id, int32_t start, int32_t count) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  if (a->release_pending) {
    return failed_precondition(fmt::format("request {} is scheduled for release", id));
  }
  if (count < 0) return invalid_argument(fmt::format("request {}: count {} < 0", id, count));
  RLT_RETURN_IF_ERROR(check_writable_range(*a, start, int64_t{start} + count));
  for (WrittenPlane& w : a->written) w.set_range(start, start + count);
  publish_ready_pages(*a);
  return {};
}

Result<bool> KVCacheManager::token_written(RequestId id, int32_t pos, int32_t depth) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  RLT_ASSIGN_OR_RETURN(int32_t plane, plane_of_depth(depth));
  if (pos < 0 || pos >= a->capacity_tokens) {
    return out_of_range(
        fmt::format("request {}: position {} outside [0, {})", id, pos, a->capacity_tokens));
  }
  return a->written[plane].test(pos);
}

Result<int32_t> KVCacheManager::written_prefix(RequestId id, int32_t depth) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  RLT_ASSIGN_OR_RETURN(int32_t plane, plane_of_depth(depth));
  return a->written[plane].prefix();
}

Status KVCacheManager::check_finalize(const Allocation& a, int32_t pos, int32_t exit_depth) const {
  RLT_ASSIGN_OR_RETURN(int32_t exit_plane, plane_of_depth(exit_depth));
  if (exit_depth >= config_.depth)
    return invalid_argument(fmt::format("request {}: depth {} is an outer plane, not a loop to exit from", a.id, exit_depth));
  const int32_t backed = a.backed_tokens(block_size());
  if (pos < 0 || pos >= backed) {
    return out_of_range(
        fmt::format("request {}: position {} outside the {} backed tokens", a.id, pos, backed));
  }
  if (!a.written[exit_plane].test(pos)) {
    return failed_precondition(fmt::format(
        "request {}: position {} is not written at exit depth {}; write every layer before "
        "finalizing",
        a.id, pos, exit_depth));
  }
  if (config_.layout == KVLayout::kShared) return {};
  for (int32_t d = exit_depth + 1; d < config_.depth; ++d) {
    if (a.written[d].test(pos)) {
      return failed_precondition(fmt::format(
          "request {}: position {} is already written at depth {}, deeper than its exit depth {}",
          a.id, pos, d, exit_depth));
    }
  }
  if (exit_depth + 1 < config_.depth)
    RLT_RETURN_IF_ERROR(check_writable_range(a, pos, int64_t{pos} + 1));
  return {};
}

Status KVCacheManager::plan_finalize(RequestId id, int32_t pos, int32_t exit_depth,
                                     std::vector<SlotCopy>* out) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  RLT_RETURN_IF_ERROR(check_finalize(*a, pos, exit_depth));
  if (config_.layout == KVLayout::kShared) return {};
  const int32_t page = pos / block_size();
  const int32_t slot = pos % block_size();
  const BlockId src = a->table(exit_depth)[page];
  // Only this token's slot is copied (never whole pages): the rest of each deeper page holds
  // other tokens' own deeper versions.
  for (int32_t d = exit_depth + 1; d < config_.depth; ++d) {
    out->push_back(SlotCopy{src, slot, a->table(d)[page], slot, d, 0, config_.geometry.num_layers});
  }
  return {};
}

Status KVCacheManager::mark_finalized(RequestId id, int32_t pos, int32_t exit_depth) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  if (a->release_pending) {
    return failed_precondition(fmt::format("request {} is scheduled for release", id));
  }
  RLT_RETURN_IF_ERROR(check_finalize(*a, pos, exit_depth));
  if (config_.layout == KVLayout::kShared) return {};
  for (int32_t d = exit_depth + 1; d < config_.depth; ++d) a->written[d].set_range(pos, pos + 1);
  publish_ready_pages(*a);
  return {};
}

Status KVCacheManager::mark_imported_prefix(RequestId id, int32_t length, int32_t start) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  if (a->release_pending) {
    return failed_precondition(
        fmt::format("request {} is scheduled for release; its import was cancelled", id));
  }
  if (start < 0 || length <= start) {
    return invalid_argument(
        fmt::format("request {}: import range [{}, {}) is empty or negative", id, start, length));
  }
  RLT_RETURN_IF_ERROR(check_writable_range(*a, start, length));
  for (int32_t plane = 0; plane < planes_; ++plane) {
    const WrittenPlane& w = a->written[plane];
    if (w.prefix() != start || w.frontier() != start) {
      return failed_precondition(fmt::format(
          "request {}: plane {} has {} tokens written contiguously and writes up to {}; an import "
          "from {} needs exactly {} and nothing beyond",
          id, plane, w.prefix(), w.frontier(), start, start));
    }
  }
  for (WrittenPlane& w : a->written) w.set_range(start, length);
  publish_ready_pages(*a);
  return {};
}

}  // namespace rlt::kv
