// KVCacheManager: construction, admission, growth, release and the read-only views.
#include "kv/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>

namespace rlt::kv {
namespace {

int32_t saturate(int64_t v) {
  return static_cast<int32_t>(std::min<int64_t>(v, std::numeric_limits<int32_t>::max()));
}

int32_t ceil_div(int32_t a, int32_t b) {
  return static_cast<int32_t>((int64_t{a} + b - 1) / b);
}

}  // namespace

Result<KVCacheManager> KVCacheManager::create(const KVCacheConfig& config) {
  RLT_RETURN_IF_ERROR(config.validate());
  return KVCacheManager(config);
}

KVCacheManager::KVCacheManager(const KVCacheConfig& config)
    : config_(config),
      planes_(config.planes()),
      model_root_(model_root_digest(config)),
      pool_(config.geometry.num_blocks),
      cache_(config.geometry.num_blocks, config.planes(), config.geometry.block_size) {
  claim_scratch_.reserve(config.geometry.num_blocks);
}

Result<int32_t> KVCacheManager::plane_of_depth(int32_t depth) const {
  RLT_RETURN_IF_ERROR(check_depth(depth));
  const int32_t loop_planes = storage_planes(config_.layout, config_.depth);
  if (depth >= config_.depth) return loop_planes + depth - config_.depth;  // an outer plane
  return config_.layout == KVLayout::kLastExited ? depth : 0;
}

Status KVCacheManager::check_depth(int32_t depth) const {
  const int32_t end = config_.depth + config_.outer_planes;
  if (depth < 0 || depth >= end) return out_of_range(fmt::format("depth {} outside [0, {})", depth, end));
  return {};
}

Result<int64_t> KVCacheManager::required_blocks(int64_t prompt_len, int64_t max_new_tokens) const {
  return kv::required_blocks(prompt_len, max_new_tokens, config_.layout, config_.depth,
                             block_size(), config_.outer_planes);
}

Result<const Allocation*> KVCacheManager::find(RequestId id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return not_found(fmt::format("request {} has no KV allocation", id));
  return &slots_[it->second];
}

Result<Allocation*> KVCacheManager::find(RequestId id) {
  auto it = index_.find(id);
  if (it == index_.end()) return not_found(fmt::format("request {} has no KV allocation", id));
  return &slots_[it->second];
}

// ---- admission ---------------------------------------------------------------------------------

Result<KVCacheManager::PlanDetail> KVCacheManager::plan_admission(
    const AllocateRequest& r, std::vector<int32_t>* hits, std::vector<Digest>* digests) const {
  const int32_t bs = block_size();
  if (index_.count(r.id) != 0) {
    return already_exists(fmt::format("request {} already has a KV allocation", r.id));
  }
  if (r.capacity_tokens < 1) {
    return invalid_argument(
        fmt::format("request {}: capacity must be >= 1 token, got {}", r.id, r.capacity_tokens));
  }
  if (r.initial_tokens < 0 || r.initial_tokens > r.capacity_tokens) {
    return invalid_argument(fmt::format("request {}: initial_tokens {} outside [0, {}]", r.id,
                                        r.initial_tokens, r.capacity_tokens));
  }
  if (r.reserved_blocks < 0) {
    return invalid_argument(
        fmt::format("request {}: reserved_blocks must be >= 0, got {}", r.id, r.reserved_blocks));
  }
  if (r.prompt.size() > static_cast<size_t>(r.capacity_tokens)) {
    return invalid_argument(
        fmt::format("request {}: prompt of {} tokens exceeds its capacity of {}", r.id,
                    r.prompt.size(), r.capacity_tokens));
  }
  PlanDetail d;
  d.max_pages = ceil_div(r.capacity_tokens, bs);
  const int64_t whole = int64_t{d.max_pages} * planes_;
  if (whole > num_blocks()) {
    return invalid_argument(fmt::format(
        "request {}: {} tokens need {} blocks ({} pages x {} planes), the pool has {}; it can "
        "never fit",
        r.id, r.capacity_tokens, whole, d.max_pages, planes_, num_blocks()));
  }
  AdmissionPlan& p = d.plan;
  if (config_.enable_prefix_caching && !r.prompt.empty()) {
    d.publishable_pages = std::min(cacheable_pages(r.prompt.size()), d.max_pages);
    const Digest root = request_root(r.cache_salt);
    const bool given = r.page_digests.size() >= static_cast<size_t>(d.publishable_pages);
    if (digests != nullptr) {
      digests->clear();
      if (given) {
        digests->assign(r.page_digests.begin(), r.page_digests.begin() + d.publishable_pages);
      } else {
        chain_page_digests(r.prompt, root, d.publishable_pages, *digests);
      }
    }
    std::span<const Digest> keys;
    if (given)
      keys = r.page_digests;
    else if (digests != nullptr)
      keys = *digests;
    p.cached_pages =
        match_prefix(r.prompt, root, d.max_pages, keys, hits, &p.exclusive_prefix_blocks);
  }
  const int32_t initial = r.initial_tokens == 0 ? r.capacity_tokens : r.initial_tokens;
  p.cached_tokens = p.cached_pages * bs;
  p.pages = std::max(ceil_div(initial, bs), p.cached_pages);
  p.new_blocks = (p.pages - p.cached_pages) * planes_;
  p.watermark_blocks = index_.empty() ? 0 : watermark_blocks();
  p.reserved_blocks = r.reserved_blocks;
  const int64_t cost =
      int64_t{p.new_blocks} + p.exclusive_prefix_blocks + p.watermark_blocks + p.reserved_blocks;
  p.cost_blocks = saturate(cost);
  p.free_blocks = num_free_blocks();
  p.evictable_blocks = num_evictable_blocks();
  p.fits = cost <= num_available_blocks();
  return d;
}

Result<AdmissionPlan> KVCacheManager::can_allocate(const AllocateRequest& request) const {
  RLT_ASSIGN_OR_RETURN(PlanDetail d, plan_admission(request, nullptr, nullptr));
  return d.plan;
}

Result<Admission> KVCacheManager::allocate(const AllocateRequest& r) {
  hit_scratch_.clear();
  RLT_ASSIGN_OR_RETURN(PlanDetail d, plan_admission(r, &hit_scratch_, &digest_scratch_));
  const AdmissionPlan& p = d.plan;
  if (!p.fits) {
    return resource_exhausted(fmt::format(
        "request {}: need {} blocks ({} new + {} cached-only prefix + {} watermark + {} reserved), "
        "{} free, {} evictable cached",
        r.id, p.cost_blocks, p.new_blocks, p.exclusive_prefix_blocks, p.watermark_blocks,
        p.reserved_blocks, p.free_blocks, p.evictable_blocks));
  }
  // From here on nothing can fail: the plan proved the claim fits.
  Allocation& a = new_slot(r.id);
  a.capacity_tokens = r.capacity_tokens;
  a.max_pages = d.max_pages;
  a.pages = p.pages;
  a.cached_pages = p.cached_pages;
  a.tables.assign(static_cast<size_t>(planes_) * d.max_pages, -1);
  // Reference the hit before claiming fresh blocks, so eviction cannot take what we reuse.
  for (int32_t e : hit_scratch_) cache_.acquire(e);
  claim(p.new_blocks);
  for (int32_t page = 0; page < p.cached_pages; ++page) {
    std::span<const BlockId> blocks = cache_.blocks(hit_scratch_[page]);
    for (int32_t plane = 0; plane < planes_; ++plane) {
      pool_.add_ref(blocks[plane]);
      a.table(plane)[page] = blocks[plane];
    }
  }
  const int32_t tail = p.pages - p.cached_pages;
  for (int32_t plane = 0; plane < planes_; ++plane) {
    std::copy_n(claim_scratch_.begin() + static_cast<ptrdiff_t>(plane) * tail, tail,
                a.table(plane) + p.cached_pages);
  }
  a.written.resize(planes_);
  for (WrittenPlane& w : a.written) {
    w.reset(r.capacity_tokens);
    w.set_range(0, p.cached_tokens);  // shared pages arrive fully written in every plane
  }
  a.page_digests.clear();
  a.publishable_tokens.clear();
  a.published_pages = p.cached_pages;
  a.publish_stopped = false;
  if (d.publishable_pages > 0) {
    a.prefix_root = request_root(r.cache_salt);
    a.publishable_tokens.assign(
        r.prompt.begin(),
        r.prompt.begin() + static_cast<ptrdiff_t>(d.publishable_pages) * block_size());
    a.page_digests.assign(digest_scratch_.begin(), digest_scratch_.end());
  }
  if (config_.enable_prefix_caching && !r.prompt.empty()) {
    PrefixCacheStats& s = cache_.mutable_stats();
    ++s.queries;
    s.query_pages += static_cast<uint64_t>(d.publishable_pages);
    s.hit_pages += static_cast<uint64_t>(p.cached_pages);
    s.hit_tokens += static_cast<uint64_t>(p.cached_tokens);
  }
  return Admission{p.cached_tokens, p.pages, p.new_blocks};
}

Allocation& KVCacheManager::new_slot(RequestId id) {
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
  }
  index_.emplace(id, slot);
  Allocation& a = slots_[slot];
  a.id = id;
  a.live = true;
  a.leases.clear();
  a.release_pending = false;
  return a;
}

void KVCacheManager::claim(int32_t count) {
  assert(count <= num_available_blocks());
  // Eviction only starts once the claim is known to succeed (F6): a refused claim never loses
  // cache entries. The evictable front is always an unused leaf, so each step frees `planes_`.
  while (pool_.num_free() < count) {
    [[maybe_unused]] int32_t freed = cache_.evict_one(pool_);
    assert(freed > 0);
  }
  claim_scratch_.resize(count);
  pool_.take(count, claim_scratch_.data());
}

// ---- growth ------------------------------------------------------------------------------------

Result<int32_t> KVCacheManager::growth_blocks(RequestId id, int32_t tokens) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  if (tokens < 1 || tokens > a->capacity_tokens) {
    return out_of_range(fmt::format("request {}: cannot back {} tokens, capacity is {}", id, tokens,
                                    a->capacity_tokens));
  }
  return std::max(0, ceil_div(tokens, block_size()) - a->pages) * planes_;
}

Status KVCacheManager::ensure_capacity(RequestId id, int32_t tokens) {
  RLT_ASSIGN_OR_RETURN(int32_t need, growth_blocks(id, tokens));
  Allocation& a = *find(id).value();
  if (a.release_pending) {
    return failed_precondition(fmt::format("request {} is scheduled for release", id));
  }
  if (need == 0) return {};
  if (need > num_available_blocks()) {
    return resource_exhausted(
        fmt::format("request {}: growth to {} tokens needs {} blocks, {} free, {} evictable cached",
                    id, tokens, need, num_free_blocks(), num_evictable_blocks()));
  }
  claim(need);
  const int32_t extra = need / planes_;
  for (int32_t plane = 0; plane < planes_; ++plane) {
    std::copy_n(claim_scratch_.begin() + static_cast<ptrdiff_t>(plane) * extra, extra,
                a.table(plane) + a.pages);
  }
  a.pages += extra;
  return {};
}

// ---- release -----------------------------------------------------------------------------------

ReleaseOutcome KVCacheManager::free(RequestId id) {
  auto it = index_.find(id);
  if (it == index_.end()) return ReleaseOutcome::kNotAllocated;
  Allocation& a = slots_[it->second];
  if (a.release_pending) return ReleaseOutcome::kDeferred;
  if (!a.leases.empty()) {
    // A transfer still reads or writes these pages: hand them back when the last lease ends.
    a.release_pending = true;
    return ReleaseOutcome::kDeferred;
  }
  release_pages(a);
  a.live = false;
  free_slots_.push_back(it->second);
  index_.erase(it);
  return ReleaseOutcome::kReleased;
}

void KVCacheManager::release_pages(Allocation& a) {
  // Cache entries deepest page first: each one then sits behind its descendants in the evictable
  // list, which is what makes the list front a leaf.
  for (int32_t page = a.published_pages - 1; page >= 0; --page) {
    cache_.release(cache_.entry_of_block(a.table(0)[page]));
  }
  // Blocks in the exact reverse of claim order, so an allocate + free pair leaves the LIFO free
  // list as it found it.
  for (int32_t plane = planes_ - 1; plane >= 0; --plane) {
    for (int32_t page = a.pages - 1; page >= 0; --page) pool_.release(a.table(plane)[page]);
  }
  a.pages = 0;
  a.published_pages = 0;
}

// ---- views -------------------------------------------------------------------------------------

Result<int32_t> KVCacheManager::allocated_blocks(RequestId id) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  return a->pages * planes_;
}

Result<std::span<const BlockId>> KVCacheManager::block_table(RequestId id, int32_t depth) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  RLT_ASSIGN_OR_RETURN(int32_t plane, plane_of_depth(depth));
  return a->backed(plane);
}

Result<std::vector<std::span<const BlockId>>> KVCacheManager::plane_block_tables(
    RequestId id) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  std::vector<std::span<const BlockId>> out;
  out.reserve(planes_);
  for (int32_t plane = 0; plane < planes_; ++plane) out.push_back(a->backed(plane));
  return out;
}

bool KVCacheManager::has_transfer_lease(RequestId id) const {
  auto it = index_.find(id);
  return it != index_.end() && !slots_[it->second].leases.empty();
}

Result<AllocationInfo> KVCacheManager::allocation_info(RequestId id) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  AllocationInfo info;
  info.capacity_tokens = a->capacity_tokens;
  info.pages = a->pages;
  info.planes = planes_;
  info.cached_tokens = a->cached_pages * block_size();
  info.published_pages = a->published_pages;
  info.num_leases = static_cast<int32_t>(a->leases.size());
  info.release_pending = a->release_pending;
  return info;
}

}  // namespace rlt::kv
