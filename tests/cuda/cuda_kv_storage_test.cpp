// CudaKVStorage against CpuKVStorage: the same writes, slot copies and reads give the same bytes.
#include "cuda/cuda_kv_storage.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "kv/cpu_kv_storage.h"

namespace rlt::cuda {
namespace {

std::vector<std::byte> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

TEST(CudaKVStorage, MatchesHostStorageOnRandomOperations) {
  RLT_REQUIRE_CUDA_DEVICE();
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    for (int32_t head_dim : {64, 6}) {  // 6: slot sizes that are not a multiple of 16 bytes
      kv::KVGeometry g;
      g.num_blocks = 40;
      g.num_layers = 3;
      g.block_size = 4;
      g.num_kv_heads = 2;
      g.head_dim = head_dim;
      g.dtype = dtype;
      auto stream = Stream::create();
      ASSERT_TRUE(stream.ok());
      auto gpu = CudaKVStorage::create(g, stream->handle());
      auto cpu = kv::CpuKVStorage::create(g);
      ASSERT_TRUE(gpu.ok() && cpu.ok()) << gpu.status().to_string();
      std::mt19937 rng(static_cast<uint32_t>(head_dim));
      const size_t block_bytes = static_cast<size_t>(g.block_elems()) * dtype_size(dtype);
      std::vector<kv::BlockId> all(static_cast<size_t>(g.num_blocks));
      for (int32_t i = 0; i < g.num_blocks; ++i)
        all[static_cast<size_t>(i)] = (i * 17) % g.num_blocks;
      const auto keys = random_bytes(all.size() * block_bytes, rng),
                 values = random_bytes(keys.size(), rng);
      ASSERT_TRUE((*gpu)->write_blocks(all, keys, values).ok());
      ASSERT_TRUE((*cpu)->write_blocks(all, keys, values).ok());
      std::vector<kv::SlotCopy> copies;
      for (int i = 0; i < 300; ++i) {  // sources in blocks 0..19, destinations in 20..39: no chains
        kv::SlotCopy c;
        c.src_block = static_cast<kv::BlockId>(rng() % 20);
        c.src_slot = static_cast<int32_t>(rng() % 4);
        c.dst_block = static_cast<kv::BlockId>(20 + rng() % 20);
        c.dst_slot = static_cast<int32_t>(rng() % 4);
        c.layer_begin = static_cast<int32_t>(rng() % 3);
        c.layer_end = c.layer_begin + 1 + static_cast<int32_t>(rng() % (3 - c.layer_begin));
        bool clash = false;  // one destination slot and layer written once per plan
        for (const auto& o : copies)
          clash |= o.dst_block == c.dst_block && o.dst_slot == c.dst_slot;
        if (!clash) copies.push_back(c);
      }
      ASSERT_TRUE((*gpu)->copy_slots(copies).ok());
      ASSERT_TRUE((*cpu)->copy_slots(copies).ok());
      std::vector<std::byte> gk(keys.size()), gv(keys.size()), ck(keys.size()), cv(keys.size());
      ASSERT_TRUE((*gpu)->read_blocks(all, gk, gv).ok());
      ASSERT_TRUE((*cpu)->read_blocks(all, ck, cv).ok());
      EXPECT_EQ(gk, ck) << dtype_name(dtype) << " head_dim " << head_dim;
      EXPECT_EQ(gv, cv) << dtype_name(dtype) << " head_dim " << head_dim;
      // A chained plan (a record reads what an earlier one wrote) is applied in order, as on the
      // host.
      std::vector<kv::SlotCopy> chain(3);
      chain[0] = {1, 0, 2, 0, 0, 0, 3};
      chain[1] = {2, 0, 3, 1, 0, 0, 3};
      chain[2] = {5, 2, 3, 1, 0, 1, 2};  // the same destination again, fewer layers
      ASSERT_TRUE((*gpu)->copy_slots(chain).ok());
      ASSERT_TRUE((*cpu)->copy_slots(chain).ok());
      ASSERT_TRUE((*gpu)->read_blocks(all, gk, gv).ok());
      ASSERT_TRUE((*cpu)->read_blocks(all, ck, cv).ok());
      EXPECT_EQ(gk, ck) << "chained plan";
      EXPECT_EQ(gv, cv) << "chained plan";
      // Bad records are refused before anything moves.
      kv::SlotCopy bad;
      bad.src_block = 0;
      bad.dst_block = 99;
      bad.layer_end = 1;
      const std::vector<kv::SlotCopy> bad_plan = {bad};
      EXPECT_EQ((*gpu)->copy_slots(bad_plan).code(), ErrorCode::kOutOfRange);
    }
  }
}

TEST(CudaKVStorage, LayerViewsPointIntoDeviceMemory) {
  RLT_REQUIRE_CUDA_DEVICE();
  kv::KVGeometry g;
  g.num_blocks = 8;
  g.num_layers = 2;
  g.block_size = 16;
  g.num_kv_heads = 4;
  g.head_dim = 128;
  g.dtype = DType::kBF16;
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  auto gpu = CudaKVStorage::create(g, stream->handle());
  ASSERT_TRUE(gpu.ok());
  const auto v0 = (*gpu)->layer_view(kv::KVPool::kKey, 0),
             v1 = (*gpu)->layer_view(kv::KVPool::kKey, 1);
  EXPECT_EQ(static_cast<std::byte*>(v1.base) - static_cast<std::byte*>(v0.base),
            static_cast<std::ptrdiff_t>(g.layer_elems() * 2));
  EXPECT_EQ(v0.block_stride, g.block_elems());
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, v0.base), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
}

}  // namespace
}  // namespace rlt::cuda
