// KVCacheManager: snapshots for lossless preemption (snapshot, restore, resume).
#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "kv/kv_cache_manager.h"

namespace rlt::kv {
namespace {

size_t words_per_plane(int32_t capacity_tokens) {
  return (static_cast<size_t>(capacity_tokens) + 63) / 64;
}

// Highest set bit + 1 over a word range (0 when empty).
int64_t bit_frontier(const uint64_t* words, size_t n) {
  for (size_t w = n; w-- > 0;) {
    if (words[w] != 0) return static_cast<int64_t>(w * 64 + 64 - std::countl_zero(words[w]));
  }
  return 0;
}

std::vector<BlockId> table_order_blocks(const Allocation& a, int32_t planes) {
  std::vector<BlockId> blocks;
  blocks.reserve(static_cast<size_t>(a.pages) * planes);
  for (int32_t plane = 0; plane < planes; ++plane) {
    std::span<const BlockId> t = a.backed(plane);
    blocks.insert(blocks.end(), t.begin(), t.end());
  }
  return blocks;
}

Status check_storage(const KVStorage& storage, const KVGeometry& mine) {
  const KVGeometry& g = storage.geometry();
  if (!g.same_block_shape(mine) || g.num_blocks != mine.num_blocks) {
    return invalid_argument(fmt::format(
        "KV storage geometry ({} blocks, {} layers, block {}, {} kv heads, head_dim {}, {}) does "
        "not match the manager's ({} blocks, {} layers, block {}, {} kv heads, head_dim {}, {})",
        g.num_blocks, g.num_layers, g.block_size, g.num_kv_heads, g.head_dim, dtype_name(g.dtype),
        mine.num_blocks, mine.num_layers, mine.block_size, mine.num_kv_heads, mine.head_dim,
        dtype_name(mine.dtype)));
  }
  return {};
}

}  // namespace

Result<KVSnapshot> KVCacheManager::snapshot(RequestId id, const KVStorage& storage) const {
  RLT_ASSIGN_OR_RETURN(const Allocation* a, find(id));
  if (!a->leases.empty()) {
    return failed_precondition(fmt::format(
        "request {}: cannot snapshot KV during a transfer ({} leases held)", id, a->leases.size()));
  }
  RLT_RETURN_IF_ERROR(check_storage(storage, config_.geometry));
  KVSnapshot snap;
  snap.layout = config_.layout;
  snap.planes = planes_;
  snap.geometry = config_.geometry;
  snap.model_root = model_root_;
  snap.capacity_tokens = a->capacity_tokens;
  snap.pages = a->pages;
  for (const WrittenPlane& w : a->written) {
    snap.written_words.insert(snap.written_words.end(), w.words().begin(), w.words().end());
  }
  if (!a->publish_stopped && a->publishable_pages() > 0) {
    snap.prefix_root = a->prefix_root;
    snap.publishable_tokens = a->publishable_tokens;
  }
  const std::vector<BlockId> blocks = table_order_blocks(*a, planes_);
  const size_t bytes = blocks.size() * static_cast<size_t>(config_.geometry.block_elems()) *
                       dtype_size(config_.geometry.dtype);
  snap.keys.resize(bytes);
  snap.values.resize(bytes);
  RLT_RETURN_IF_ERROR(storage.read_blocks(blocks, snap.keys, snap.values));
  return snap;
}

Status KVCacheManager::validate_snapshot(const KVSnapshot& s) const {
  if (s.layout != config_.layout) {
    return invalid_argument(fmt::format("snapshot layout {} does not match the manager's {}",
                                        rlt::name(s.layout), rlt::name(config_.layout)));
  }
  if (s.planes != planes_) {
    return invalid_argument(
        fmt::format("snapshot plane count {} does not match the manager's {}", s.planes, planes_));
  }
  if (!s.geometry.same_block_shape(config_.geometry)) {
    return invalid_argument(fmt::format(
        "snapshot block shape (layers {}, block {}, kv heads {}, head_dim {}, {}) does not match "
        "the manager's (layers {}, block {}, kv heads {}, head_dim {}, {})",
        s.geometry.num_layers, s.geometry.block_size, s.geometry.num_kv_heads, s.geometry.head_dim,
        dtype_name(s.geometry.dtype), config_.geometry.num_layers, config_.geometry.block_size,
        config_.geometry.num_kv_heads, config_.geometry.head_dim,
        dtype_name(config_.geometry.dtype)));
  }
  if (s.model_root != model_root_) {
    return invalid_argument("snapshot was taken under another model, salt or configuration");
  }
  const int32_t bs = block_size();
  const int32_t max_pages = s.capacity_tokens < 1 ? 0 : (int64_t{s.capacity_tokens} + bs - 1) / bs;
  if (s.capacity_tokens < 1 || s.pages < 1 || s.pages > max_pages) {
    return invalid_argument(fmt::format("snapshot has {} pages for a capacity of {} tokens",
                                        s.pages, s.capacity_tokens));
  }
  const size_t words = words_per_plane(s.capacity_tokens);
  if (s.written_words.size() != words * planes_) {
    return invalid_argument(fmt::format("snapshot written state has {} words, expected {}",
                                        s.written_words.size(), words * planes_));
  }
  const int64_t backed = std::min<int64_t>(int64_t{s.pages} * bs, s.capacity_tokens);
  for (int32_t plane = 0; plane < planes_; ++plane) {
    int64_t f = bit_frontier(s.written_words.data() + plane * words, words);
    if (f > backed) {
      return invalid_argument(
          fmt::format("snapshot plane {} marks position {} written, beyond its {} backed tokens",
                      plane, f - 1, backed));
    }
  }
  if (s.publishable_tokens.size() % static_cast<size_t>(bs) != 0 ||
      s.publishable_tokens.size() / bs > static_cast<size_t>(max_pages)) {
    return invalid_argument(
        fmt::format("snapshot holds {} prompt tokens to publish, not whole pages within capacity",
                    s.publishable_tokens.size()));
  }
  const size_t bytes = static_cast<size_t>(s.pages) * planes_ *
                       static_cast<size_t>(config_.geometry.block_elems()) *
                       dtype_size(config_.geometry.dtype);
  if (s.keys.size() != bytes || s.values.size() != bytes) {
    return invalid_argument(fmt::format("snapshot page data is {} / {} bytes, expected {}",
                                        s.keys.size(), s.values.size(), bytes));
  }
  return {};
}

Status KVCacheManager::restore(RequestId id, const KVSnapshot& snap, KVStorage& storage) {
  RLT_ASSIGN_OR_RETURN(Allocation * a, find(id));
  RLT_RETURN_IF_ERROR(validate_snapshot(snap));
  RLT_RETURN_IF_ERROR(check_storage(storage, config_.geometry));
  if (!a->leases.empty() || a->release_pending) {
    return failed_precondition(
        fmt::format("request {}: cannot restore into a leased allocation", id));
  }
  if (snap.capacity_tokens != a->capacity_tokens) {
    return invalid_argument(
        fmt::format("request {}: snapshot capacity of {} tokens differs from the allocation's {}",
                    id, snap.capacity_tokens, a->capacity_tokens));
  }
  if (snap.pages != a->pages) {
    return invalid_argument(
        fmt::format("request {}: snapshot page count {} differs from the allocation's {}", id,
                    snap.pages, a->pages));
  }
  for (int32_t plane = 0; plane < planes_; ++plane) {
    if (a->written[plane].frontier() != 0) {
      return failed_precondition(fmt::format(
          "request {}: allocation already holds written tokens (plane {} up to {}); restore needs "
          "an empty one",
          id, plane, a->written[plane].frontier()));
    }
  }
  // Page contents first: if the device refuses, the logical state was never touched.
  RLT_RETURN_IF_ERROR(
      storage.write_blocks(table_order_blocks(*a, planes_), snap.keys, snap.values));
  const size_t words = words_per_plane(snap.capacity_tokens);
  std::vector<uint64_t> plane_words(words);
  for (int32_t plane = 0; plane < planes_; ++plane) {
    std::copy_n(snap.written_words.begin() + static_cast<ptrdiff_t>(plane * words), words,
                plane_words.begin());
    a->written[plane].assign(snap.capacity_tokens, plane_words);
  }
  a->page_digests.clear();
  a->publishable_tokens.clear();
  a->published_pages = 0;
  a->publish_stopped = false;
  if (config_.enable_prefix_caching && !snap.publishable_tokens.empty()) {
    // Restored pages are private; they may be published again (the originals may have been
    // evicted meanwhile). If identical pages are still cached, publication stops at the first.
    const int32_t bs = block_size();
    a->prefix_root = snap.prefix_root;
    a->publishable_tokens = snap.publishable_tokens;
    Digest parent = snap.prefix_root;
    for (size_t off = 0; off < snap.publishable_tokens.size(); off += bs) {
      parent =
          page_digest(parent, std::span<const TokenId>(snap.publishable_tokens).subspan(off, bs));
      a->page_digests.push_back(parent);
    }
    publish_ready_pages(*a);
  }
  return {};
}

Status KVCacheManager::resume(RequestId id, const KVSnapshot& snap, KVStorage& storage) {
  // Everything that can be checked without an allocation is checked before claiming, so a bad
  // snapshot never costs cache entries.
  RLT_RETURN_IF_ERROR(validate_snapshot(snap));
  RLT_RETURN_IF_ERROR(check_storage(storage, config_.geometry));
  AllocateRequest r;
  r.id = id;
  r.capacity_tokens = snap.capacity_tokens;
  r.initial_tokens = static_cast<int32_t>(
      std::min<int64_t>(snap.capacity_tokens, int64_t{snap.pages} * block_size()));
  RLT_ASSIGN_OR_RETURN([[maybe_unused]] Admission admission, allocate(r));
  Status s = restore(id, snap, storage);
  if (!s.ok()) {
    free(id);
    return s.with_context(fmt::format("resuming request {}", id));
  }
  return {};
}

}  // namespace rlt::kv
