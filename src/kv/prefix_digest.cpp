#include "kv/prefix_digest.h"

#include <bit>
#include <cstring>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace rlt::kv {
namespace {

// Keys are defined over little-endian token bytes so they mean the same on every host we build
// for; rlt only targets little-endian machines, so hashing the in-memory ids is that encoding.
static_assert(std::endian::native == std::endian::little,
              "prefix keys assume a little-endian host");

Digest from_xxh(XXH128_hash_t h) {
  return Digest{h.low64, h.high64};
}

void append_i32(std::string& out, int64_t v) {
  int32_t x = static_cast<int32_t>(v);
  char buf[sizeof x];
  std::memcpy(buf, &x, sizeof x);
  out.append(buf, sizeof buf);
}

}  // namespace

Digest model_root_digest(const KVCacheConfig& config) {
  // Length-prefix every variable field so ("ab", "c") and ("a", "bc") cannot meet.
  std::string seed = "rlt.kv.prefix.v1";
  append_i32(seed, static_cast<int64_t>(config.model_salt.size()));
  seed += config.model_salt;
  std::string_view dtype = dtype_name(config.geometry.dtype);
  append_i32(seed, static_cast<int64_t>(dtype.size()));
  seed += dtype;
  std::string_view layout = rlt::name(config.layout);
  append_i32(seed, static_cast<int64_t>(layout.size()));
  seed += layout;
  const KVGeometry& g = config.geometry;
  for (int64_t v : {int64_t{g.num_layers}, int64_t{g.block_size}, int64_t{g.num_kv_heads},
                    int64_t{g.head_dim}, int64_t{config.depth}}) {
    append_i32(seed, v);
  }
  return from_xxh(XXH3_128bits(seed.data(), seed.size()));
}

Digest salted_root_digest(const Digest& root, std::string_view cache_salt) {
  if (cache_salt.empty()) return root;
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, &root, sizeof root);
  XXH3_128bits_update(&state, cache_salt.data(), cache_salt.size());
  return from_xxh(XXH3_128bits_digest(&state));
}

Digest page_digest(const Digest& parent, std::span<const TokenId> page_tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, &parent, sizeof parent);
  XXH3_128bits_update(&state, page_tokens.data(), page_tokens.size_bytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace rlt::kv
