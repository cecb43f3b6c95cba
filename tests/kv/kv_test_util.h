// Small builders shared by the kv tests.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace rlt::kv::testing {

inline KVCacheConfig make_config(int32_t num_blocks, int32_t block_size, int32_t depth,
                                 KVLayout layout = KVLayout::kLastExited, bool prefix = false,
                                 int32_t layers = 2) {
  KVCacheConfig c;
  c.geometry.num_blocks = num_blocks;
  c.geometry.num_layers = layers;
  c.geometry.block_size = block_size;
  c.geometry.num_kv_heads = 2;
  c.geometry.head_dim = 4;
  c.geometry.dtype = DType::kF32;
  c.depth = depth;
  c.layout = layout;
  c.enable_prefix_caching = prefix;
  c.model_salt = "test-model@v1";
  return c;
}

inline KVCacheManager make_manager(const KVCacheConfig& c) {
  auto m = KVCacheManager::create(c);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

// Tokens first, first+1, ... (n of them).
inline std::vector<TokenId> iota_tokens(int32_t n, TokenId first = 1) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

inline AllocateRequest request(RequestId id, int32_t capacity, std::span<const TokenId> prompt = {},
                               int32_t initial = 0) {
  AllocateRequest r;
  r.id = id;
  r.capacity_tokens = capacity;
  r.prompt = prompt;
  r.initial_tokens = initial;
  return r;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

#define KV_ASSERT_OK(expr)                        \
  do {                                            \
    ::rlt::Status kv_s_ = (expr);                 \
    ASSERT_TRUE(kv_s_.ok()) << kv_s_.to_string(); \
  } while (0)

#define KV_EXPECT_CODE(expr, expected_code)                        \
  do {                                                             \
    ::rlt::Status kv_s_ = (expr);                                  \
    EXPECT_EQ(kv_s_.code(), (expected_code)) << kv_s_.to_string(); \
  } while (0)

}  // namespace rlt::kv::testing
