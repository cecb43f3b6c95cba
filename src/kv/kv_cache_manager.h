// KVCacheManager: the logical owner of KV pages for looped models. It hands out physical blocks
// (pages) from one pool, keeps one block table per depth plane for every request, shares full
// prompt pages through a prefix cache, tracks which positions hold K/V, plans early-exit
// finalize copies, saves and restores requests for preemption, and leases allocations to
// transfers. Device memory is not here: the runner implements KVStorage.
//
// Contracts (docs/kv-cache.md has the full story):
//  - Claims are all-or-nothing and refuse before evicting anything: a refused allocate,
//    ensure_capacity or resume leaves the manager bit-for-bit unchanged (state_fingerprint()).
//  - Capacity refusals are kResourceExhausted with the numbers ("need 12 blocks, 5 free, 3
//    evictable cached"); a request that can never fit is kInvalidArgument.
//  - Every other bad input is a Status; nothing aborts.
//  - Thread-safety: none. Call from the scheduler thread only. Spans returned by views stay valid
//    until the next mutating call for that request.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kv/allocation.h"
#include "kv/block_pool.h"
#include "kv/kv_snapshot.h"
#include "kv/kv_storage.h"
#include "kv/kv_types.h"
#include "kv/prefix_cache.h"
#include "rlt/status.h"

namespace rlt::kv {

// What admission asks for.
struct AllocateRequest {
  RequestId id = 0;
  // Tokens the KV must cover over the request's life: capacity_tokens(prompt, max_new_tokens).
  int32_t capacity_tokens = 0;
  // Tokens to back now (incremental allocation, grown later with ensure_capacity);
  // 0 reserves the whole capacity. Raised to the prefix hit when smaller.
  int32_t initial_tokens = 0;
  // The prompt. With prefix caching on it is looked up (its full pages before the last token) and
  // later published as its pages get written; empty means no prefix sharing.
  std::span<const TokenId> prompt;
  // Per-request isolation (tenant, adapter): part of every prefix key of this request.
  std::string_view cache_salt;
  // Blocks the scheduler holds back on top (e.g. growth it promised running requests).
  int32_t reserved_blocks = 0;
  // prompt_page_digests(prompt, cache_salt) when the caller keeps them (so that a request tried
  // many times is hashed once); empty: computed here.
  std::span<const Digest> page_digests;
};

// The pure answer to "would allocate succeed now, and at what price?".
struct AdmissionPlan {
  bool fits = false;
  int32_t cached_pages = 0;             // prefix pages that would be shared
  int32_t cached_tokens = 0;            // cached_pages * block_size: prefill resumes here
  int32_t pages = 0;                    // pages the allocation would back
  int32_t new_blocks = 0;               // blocks claimed from the pool
  int32_t exclusive_prefix_blocks = 0;  // cached-only blocks the hit would pin (not evictable then)
  int32_t watermark_blocks = 0;         // headroom applied (only when other allocations are live)
  int32_t reserved_blocks = 0;
  int32_t cost_blocks = 0;       // new + exclusive + watermark + reserved
  int32_t free_blocks = 0;       // unowned blocks on the free list
  int32_t evictable_blocks = 0;  // blocks only the prefix cache holds
};

struct Admission {
  int32_t cached_tokens = 0;  // prefill starts at this position
  int32_t pages = 0;
  int32_t new_blocks = 0;
};

// Result of a prefix lookup; valid until the cache changes (generations detect staleness).
struct PrefixMatch {
  struct Ref {
    int32_t entry = -1;
    uint32_t generation = 0;
  };
  int32_t pages = 0;
  int32_t cached_tokens = 0;
  std::vector<Ref> entries;  // one per page, root first
};

enum class ReleaseOutcome : uint8_t {
  kReleased,      // pages returned (shared ones stay with their other owners)
  kDeferred,      // leased: released when the last lease ends
  kNotAllocated,  // unknown id or already released: nothing to do
};

struct AllocationInfo {
  int32_t capacity_tokens = 0;
  int32_t pages = 0;
  int32_t planes = 0;
  int32_t cached_tokens = 0;    // prefix hit at admission
  int32_t published_pages = 0;  // leading pages this request holds as cache entries
  int32_t num_leases = 0;
  bool release_pending = false;
};

class KVCacheManager {
 public:
  // Errors: invalid config (see KVCacheConfig::validate).
  static Result<KVCacheManager> create(const KVCacheConfig& config);

  KVCacheManager(KVCacheManager&&) noexcept = default;
  KVCacheManager& operator=(KVCacheManager&&) noexcept = default;
  KVCacheManager(const KVCacheManager&) = delete;
  KVCacheManager& operator=(const KVCacheManager&) = delete;

  const KVCacheConfig& config() const { return config_; }
  int32_t block_size() const { return config_.geometry.block_size; }
  int32_t num_planes() const { return planes_; }
  // Plane read and written at `depth`: depth (last_exited) or 0 (shared); depths config.depth + i
  // name the outer planes (KVCacheConfig::outer_planes), after the loop planes. Errors: depth
  // outside [0, config.depth + config.outer_planes).
  Result<int32_t> plane_of_depth(int32_t depth) const;

  // ---- capacity views -------------------------------------------------------------------------
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_evictable_blocks() const { return cache_.evictable_blocks(); }
  // What a claim can use: free + evictable cached.
  int32_t num_available_blocks() const { return num_free_blocks() + num_evictable_blocks(); }
  int32_t num_used_blocks() const { return num_blocks() - num_available_blocks(); }
  int32_t num_cached_blocks() const { return cache_.cached_blocks(); }
  int32_t num_prefix_entries() const { return cache_.num_entries(); }
  int32_t watermark_blocks() const { return config_.watermark_blocks(); }
  int32_t num_allocations() const { return static_cast<int32_t>(index_.size()); }
  // Whole-life blocks of a request under this manager's layout (see kv::required_blocks).
  Result<int64_t> required_blocks(int64_t prompt_len, int64_t max_new_tokens) const;

  // ---- admission, growth, release -------------------------------------------------------------
  // Pure: would `request` be admitted now? Errors (never "does not fit"): a duplicate id, bad
  // sizes, a request that can never fit the pool (kInvalidArgument).
  Result<AdmissionPlan> can_allocate(const AllocateRequest& request) const;
  // Claims the prefix hit and fresh pages in one all-or-nothing step. kResourceExhausted when the
  // plan does not fit, with the manager unchanged; other errors as can_allocate.
  Result<Admission> allocate(const AllocateRequest& request);
  // Blocks ensure_capacity(id, tokens) would claim (0 when already backed).
  Result<int32_t> growth_blocks(RequestId id, int32_t tokens) const;
  // Backs positions [0, tokens) in every plane, growing all planes together or none. No watermark
  // (the watermark exists for this growth). kResourceExhausted leaves everything unchanged.
  Status ensure_capacity(RequestId id, int32_t tokens);
  // Releases a request's pages (on finish or abort). Idempotent; deferred while leased.
  ReleaseOutcome free(RequestId id);

  // ---- prefix cache ---------------------------------------------------------------------------
  // Pure lookup of the cached pages of `prompt` (never covering its last token). `page_digests`:
  // as AllocateRequest::page_digests.
  PrefixMatch lookup_prefix(std::span<const TokenId> prompt, std::string_view cache_salt = {},
                            std::span<const Digest> page_digests = {}) const;
  // The prefix keys of `prompt`'s cacheable pages, chained from the salted root (empty without
  // prefix caching): what admission would compute, for callers that hash a prompt once.
  std::vector<Digest> prompt_page_digests(std::span<const TokenId> prompt,
                                          std::string_view cache_salt = {}) const;
  // Blocks of `match` only the cache holds now: claiming the match makes them non-evictable, so
  // admission pays for them. kFailedPrecondition when the match went stale.
  Result<int32_t> exclusive_prefix_blocks(const PrefixMatch& match) const;
  // Evicts least-recently-used unused leaves until `blocks` blocks came back (or nothing is
  // evictable); returns how many did.
  int32_t trim_prefix_cache(int32_t blocks);
  // Drops every entry (e.g. after a weight update); pages in use stay with their requests.
  void reset_prefix_cache();
  const PrefixCacheStats& prefix_stats() const { return cache_.stats(); }

  // ---- written state and finalize -------------------------------------------------------------
  // The runner wrote K/V of positions [start, start + count) at every layer of plane(depth).
  // Publishes newly complete prompt pages to the prefix cache. Errors: unknown id, bad depth,
  // positions outside the backed pages, positions on pages shared through the prefix cache
  // (those must never be rewritten), a release-pending allocation.
  Status record_written(RequestId id, int32_t depth, int32_t start, int32_t count);
  // The same for every depth (prefill runs all loops for every prompt token).
  Status record_written_all_depths(RequestId id, int32_t start, int32_t count);
  // True iff position `pos` holds K/V at plane(depth). Errors: unknown id, bad depth,
  // pos outside [0, capacity_tokens).
  Result<bool> token_written(RequestId id, int32_t pos, int32_t depth) const;
  // Contiguous written prefix of plane(depth): attention at position p needs >= p.
  Result<int32_t> written_prefix(RequestId id, int32_t depth) const;
  // Early exit of the token at `pos` at depth `exit_depth`: appends to `out` the copies that make
  // every deeper plane hold its depth-exit_depth K/V (all layers). Pure. Under `shared`, or at the
  // deepest depth, appends nothing. Errors: token not written at exit_depth, already written at a
  // deeper plane, destination on a shared prefix page, bad ids.
  Status plan_finalize(RequestId id, int32_t pos, int32_t exit_depth,
                       std::vector<SlotCopy>* out) const;
  // Marks the deeper planes written; call once the plan's copies are queued ahead of any read.
  // Same checks as plan_finalize; a no-op under `shared` (after checking the write).
  Status mark_finalized(RequestId id, int32_t pos, int32_t exit_depth);
  // A transfer peer wrote positions [start, length) in every plane (PD import). Requires every
  // plane written exactly up to `start` with nothing beyond, and length within the backed pages.
  Status mark_imported_prefix(RequestId id, int32_t length, int32_t start = 0);

  // ---- views ----------------------------------------------------------------------------------
  bool has_allocation(RequestId id) const { return index_.count(id) != 0; }
  // pages * planes. kNotFound for an unknown id (as every view below).
  Result<int32_t> allocated_blocks(RequestId id) const;
  // The table attention reads at `depth` (plane(depth)), one block per backed page.
  Result<std::span<const BlockId>> block_table(RequestId id, int32_t depth) const;
  // Every plane's table, indexed by plane (used by transfers).
  Result<std::vector<std::span<const BlockId>>> plane_block_tables(RequestId id) const;
  bool has_transfer_lease(RequestId id) const;
  Result<AllocationInfo> allocation_info(RequestId id) const;

  // ---- snapshots (preemption) -----------------------------------------------------------------
  // Copies a request's state and pages to host. The caller must have finished device work on it.
  // The allocation is unchanged (free it afterwards). Errors: unknown id, leased allocation,
  // storage geometry mismatch, storage errors.
  Result<KVSnapshot> snapshot(RequestId id, const KVStorage& storage) const;
  // Installs `snap` into the caller's fresh allocation `id`. Validates layout, plane count, block
  // shape, capacity, page count, an empty unleased target and the snapshot's own sizes first; on
  // any error nothing changes.
  Status restore(RequestId id, const KVSnapshot& snap, KVStorage& storage);
  // allocate (no prefix, snapshot's capacity and pages, watermark applied) + restore, atomically:
  // kResourceExhausted when it does not fit (nothing changed); a storage failure frees it again.
  Status resume(RequestId id, const KVSnapshot& snap, KVStorage& storage);

  // ---- transfer leases (PD disaggregation) ----------------------------------------------------
  // While any lease is held: free() is deferred, snapshot/restore are refused, pages stay put.
  // Errors: unknown id, allocation already scheduled for release, duplicate transfer id.
  Status pin_transfer(RequestId id, TransferId transfer);
  // Ends a lease (completion or failure); runs a deferred free when it was the last.
  Status unpin_transfer(RequestId id, TransferId transfer);
  // allocate + pin_transfer in one step: reserves pages for an incoming request.
  Result<Admission> reserve_for_transfer(const AllocateRequest& request, TransferId transfer);

  // ---- checking -------------------------------------------------------------------------------
  // Every structural invariant (docs/kv-cache.md "Invariants"); O(blocks + table entries +
  // entries). kInternal naming the first violation.
  Status check_invariants() const;
  // Hash of the whole logical state (free-list order, references, tables, written state, leases,
  // cache entries and LRU order, counters). Tests use it to prove refusals change nothing.
  uint64_t state_fingerprint() const;

 private:
  explicit KVCacheManager(const KVCacheConfig& config);

  struct PlanDetail {
    AdmissionPlan plan;
    int32_t max_pages = 0;
    int32_t publishable_pages = 0;
  };
  // Shared by can_allocate / allocate: validates and prices. Optional outputs: `hits` gets the
  // matched entries (root first), `digests` the keys of every publishable prompt page (computed
  // once, then used both for matching and for later publication).
  Result<PlanDetail> plan_admission(const AllocateRequest& request, std::vector<int32_t>* hits,
                                    std::vector<Digest>* digests) const;
  // Walks the prompt's cacheable pages; returns the number of leading hits (<= max_pages).
  // `digests`, when not empty, holds the page keys already computed.
  int32_t match_prefix(std::span<const TokenId> prompt, const Digest& root, int32_t max_pages,
                       std::span<const Digest> digests, std::vector<int32_t>* hits,
                       int32_t* exclusive_blocks) const;
  int32_t cacheable_pages(size_t prompt_len) const;
  // Appends the chained keys of `prompt`'s first `pages` pages, starting from `root`.
  void chain_page_digests(std::span<const TokenId> prompt, const Digest& root, int32_t pages,
                          std::vector<Digest>& out) const;
  Digest request_root(std::string_view cache_salt) const;

  // All-or-nothing block claim into claim_scratch_: evicts LRU unused leaves only once it is
  // known the claim will succeed (the F6 rule). Precondition: count <= num_available_blocks().
  void claim(int32_t count);
  Allocation& new_slot(RequestId id);
  void release_pages(Allocation& a);
  void publish_ready_pages(Allocation& a);
  // Snapshot checks that need no target allocation (layout, planes, block shape, model, sizes).
  Status validate_snapshot(const KVSnapshot& snap) const;

  Result<const Allocation*> find(RequestId id) const;
  Result<Allocation*> find(RequestId id);
  Status check_depth(int32_t depth) const;
  // int64 bounds: start + count of two int32s must not overflow before it is checked.
  Status check_writable_range(const Allocation& a, int64_t start, int64_t end) const;
  Status check_finalize(const Allocation& a, int32_t pos, int32_t exit_depth) const;

  KVCacheConfig config_;
  int32_t planes_;
  Digest model_root_;
  BlockPool pool_;
  PrefixCache cache_;
  std::vector<Allocation> slots_;
  std::vector<int32_t> free_slots_;
  std::unordered_map<RequestId, int32_t> index_;
  std::vector<BlockId> claim_scratch_;
  std::vector<int32_t> hit_scratch_;
  std::vector<Digest> digest_scratch_;
};

}  // namespace rlt::kv
