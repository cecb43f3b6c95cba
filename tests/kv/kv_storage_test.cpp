// CpuKVStorage: layout, per-layer views, slot copies, block read/write, dtypes and errors.
#include <gtest/gtest.h>

#include <cstring>

#include "common/half.h"
#include "kv/cpu_kv_storage.h"
#include "kv_test_util.h"

namespace rlt::kv {
namespace {

KVGeometry geometry(DType dtype = DType::kF32) {
  return KVGeometry{.num_blocks = 5,
                    .num_layers = 3,
                    .block_size = 4,
                    .num_kv_heads = 2,
                    .head_dim = 8,
                    .dtype = dtype};
}

std::unique_ptr<CpuKVStorage> make_storage(DType dtype = DType::kF32) {
  auto s = CpuKVStorage::create(geometry(dtype));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

float read_f32(const std::byte* p, int32_t i) {
  float v;
  std::memcpy(&v, p + i * sizeof(float), sizeof v);
  return v;
}

void write_f32(std::byte* p, int32_t i, float v) {
  std::memcpy(p + i * sizeof(float), &v, sizeof v);
}

TEST(KvCpuStorage, PoolsAreZeroedAndSizedFromGeometry) {
  auto s = make_storage();
  EXPECT_EQ(s->pool_bytes(), size_t{5} * 3 * 4 * 2 * 8 * 4);
  EXPECT_EQ(geometry().bytes_per_block(), int64_t{2} * 3 * 4 * 2 * 8 * 4);
  const std::byte* p = s->slot_data(KVPool::kValue, 4, 2, 3);
  for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(read_f32(p, i), 0.0f);
}

TEST(KvCpuStorage, LayerViewAddressesMatchTheFiveDimensionalLayout) {
  auto s = make_storage();
  for (KVPool pool : {KVPool::kKey, KVPool::kValue}) {
    for (int32_t layer = 0; layer < 3; ++layer) {
      PagedKVLayerView v = s->layer_view(pool, layer);
      EXPECT_EQ(v.block_stride, 3 * 4 * 2 * 8);
      EXPECT_EQ(v.token_stride, 16);
      EXPECT_EQ(v.head_stride, 8);
      EXPECT_EQ(v.num_blocks, 5);
      EXPECT_EQ(v.block_size, 4);
      EXPECT_EQ(v.num_kv_heads, 2);
      EXPECT_EQ(v.head_dim, 8);
      EXPECT_EQ(v.dtype, DType::kF32);
      // Element (block 3, slot 2, head 1, dim 5) through the view and through slot_data.
      auto* base = static_cast<float*>(v.base);
      float* via_view = base + 3 * v.block_stride + 2 * v.token_stride + 1 * v.head_stride + 5;
      auto* via_slot = reinterpret_cast<float*>(s->slot_data(pool, 3, layer, 2)) + 8 + 5;
      EXPECT_EQ(via_view, via_slot);
    }
  }
}

TEST(KvCpuStorage, CopySlotsMovesOneTokenForTheListedLayers) {
  auto s = make_storage();
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (int32_t i = 0; i < 16; ++i) {
      write_f32(s->slot_data(KVPool::kKey, 1, layer, 2), i, 100.0f * layer + i);
      write_f32(s->slot_data(KVPool::kValue, 1, layer, 2), i, -100.0f * layer - i);
    }
  }
  std::vector<SlotCopy> plan = {SlotCopy{1, 2, 4, 2, 1, 0, 2}};  // layers 0 and 1 only
  KV_ASSERT_OK(s->copy_slots(plan));
  for (int32_t layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(read_f32(s->slot_data(KVPool::kKey, 4, layer, 2), 7), 100.0f * layer + 7);
    EXPECT_EQ(read_f32(s->slot_data(KVPool::kValue, 4, layer, 2), 7), -100.0f * layer - 7);
  }
  EXPECT_EQ(read_f32(s->slot_data(KVPool::kKey, 4, 2, 2), 7), 0.0f);  // layer 2 not copied
  EXPECT_EQ(read_f32(s->slot_data(KVPool::kKey, 4, 0, 1), 0), 0.0f);  // other slots untouched
}

TEST(KvCpuStorage, CopySlotsValidatesTheWholePlanFirst) {
  auto s = make_storage();
  write_f32(s->slot_data(KVPool::kKey, 0, 0, 0), 0, 5.0f);
  std::vector<SlotCopy> plan = {SlotCopy{0, 0, 1, 0, 1, 0, 3}, SlotCopy{0, 0, 5, 0, 1, 0, 3}};
  KV_EXPECT_CODE(s->copy_slots(plan), ErrorCode::kOutOfRange);
  EXPECT_EQ(read_f32(s->slot_data(KVPool::kKey, 1, 0, 0), 0), 0.0f);  // first copy not applied
  KV_EXPECT_CODE(s->copy_slots(std::vector<SlotCopy>{SlotCopy{0, 4, 1, 0, 1, 0, 3}}),
                 ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(s->copy_slots(std::vector<SlotCopy>{SlotCopy{0, 0, 1, 0, 1, 2, 4}}),
                 ErrorCode::kOutOfRange);
  KV_EXPECT_CODE(s->copy_slots(std::vector<SlotCopy>{SlotCopy{-1, 0, 1, 0, 1, 0, 1}}),
                 ErrorCode::kOutOfRange);
}

TEST(KvCpuStorage, ReadAndWriteBlocksRoundTrip) {
  auto s = make_storage(DType::kBF16);
  const size_t block_bytes = static_cast<size_t>(geometry().block_elems()) * 2;
  std::vector<std::byte> k(2 * block_bytes), v(2 * block_bytes);
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<std::byte>(i * 7);
    v[i] = static_cast<std::byte>(i * 13 + 1);
  }
  std::vector<BlockId> blocks = {3, 1};
  KV_ASSERT_OK(s->write_blocks(blocks, k, v));
  std::vector<std::byte> k2(k.size()), v2(v.size());
  KV_ASSERT_OK(s->read_blocks(blocks, k2, v2));
  EXPECT_EQ(k, k2);
  EXPECT_EQ(v, v2);
  // Block 3 holds the first half.
  std::vector<std::byte> one_k(block_bytes), one_v(block_bytes);
  KV_ASSERT_OK(s->read_blocks(std::vector<BlockId>{3}, one_k, one_v));
  EXPECT_TRUE(std::equal(one_k.begin(), one_k.end(), k.begin()));
  // Bad sizes and ids.
  KV_EXPECT_CODE(s->read_blocks(blocks, one_k, one_v), ErrorCode::kInvalidArgument);
  KV_EXPECT_CODE(s->write_blocks(std::vector<BlockId>{7}, one_k, one_v), ErrorCode::kOutOfRange);
}

TEST(KvCpuStorage, SixteenBitPoolsStoreRawHalfWords) {
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    auto s = make_storage(dtype);
    PagedKVLayerView v = s->layer_view(KVPool::kKey, 1);
    EXPECT_EQ(v.dtype, dtype);
    auto* base = static_cast<uint16_t*>(v.base);
    uint16_t h = dtype == DType::kBF16 ? f32_to_bf16(1.5f) : f32_to_f16(1.5f);
    base[2 * v.block_stride + 1 * v.token_stride] = h;
    KV_ASSERT_OK(s->copy_slots(std::vector<SlotCopy>{SlotCopy{2, 1, 0, 3, 1, 1, 2}}));
    uint16_t got = static_cast<uint16_t*>(v.base)[0 * v.block_stride + 3 * v.token_stride];
    EXPECT_EQ(dtype == DType::kBF16 ? bf16_to_f32(got) : f16_to_f32(got), 1.5f);
  }
}

TEST(KvCpuStorage, RejectsInvalidGeometry) {
  KVGeometry g = geometry();
  g.num_kv_heads = 0;
  EXPECT_EQ(CpuKVStorage::create(g).status().code(), ErrorCode::kInvalidArgument);
  g = geometry(DType::kI8);
  EXPECT_EQ(CpuKVStorage::create(g).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace rlt::kv
