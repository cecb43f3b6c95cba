// KVCacheManager: transfer leases (prefill/decode disaggregation). A lease pins an allocation's
// pages while a transfer reads (sender) or writes (receiver) them: a free() during the lease is
// recorded and carried out by the last unpin, so pages are never handed to another request while
// bytes may still land in them, and never lost either.
#include <fmt/format.h>

#include <algorithm>

#include "kv/kv_cache_manager.h"

namespace rlt::kv {

Status KVCacheManager::pin_transfer(RequestId id, TransferId transfer) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  if (a->release_pending) {
    return failed_precondition(
        fmt::format("request {} is scheduled for release; transfer {} cannot start", id, transfer));
  }
  if (std::find(a->leases.begin(), a->leases.end(), transfer) != a->leases.end()) {
    return already_exists(fmt::format("request {} already leased to transfer {}", id, transfer));
  }
  a->leases.push_back(transfer);
  return {};
}

Status KVCacheManager::unpin_transfer(RequestId id, TransferId transfer) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  auto it = std::find(a->leases.begin(), a->leases.end(), transfer);
  if (it == a->leases.end()) {
    return not_found(fmt::format("request {} holds no lease for transfer {}", id, transfer));
  }
  a->leases.erase(it);
  if (a->leases.empty() && a->release_pending) {
    a->release_pending = false;
    [[maybe_unused]] ReleaseOutcome out = free(id);
  }
  return {};
}

Result<Admission> KVCacheManager::reserve_for_transfer(const AllocateRequest& request,
                                                       TransferId transfer) {
  RLT_ASSIGN_OR_RETURN(Admission admission, allocate(request));
  // Cannot fail: the allocation is fresh, unleased and not scheduled for release.
  RLT_RETURN_IF_ERROR(pin_transfer(request.id, transfer));
  return admission;
}

}  // namespace rlt::kv
