#include "common/offset_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace rlt {
namespace {

TEST(OffsetAllocator, AlignsAndReusesFreedRanges) {
  OffsetAllocator a(4096);
  auto x = a.allocate(100, 256);
  auto y = a.allocate(100, 256);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 256u);  // 100..255 is padding before the aligned start
  EXPECT_TRUE(a.release(*x).ok());
  auto z = a.allocate(64, 64);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, 0u) << "best fit takes the freed 100-byte hole, not the tail";
  EXPECT_TRUE(a.release(*y).ok());
  EXPECT_TRUE(a.release(*z).ok());
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.free_ranges(), 1u) << "neighbours merge back into one range";
  EXPECT_EQ(a.largest_free(), 4096u);
}

TEST(OffsetAllocator, ClearErrors) {
  OffsetAllocator a(1000);
  EXPECT_EQ(a.allocate(0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(a.allocate(8, 3).status().code(), ErrorCode::kInvalidArgument);
  auto full = a.allocate(2000);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("largest free range 1000"), std::string::npos)
      << full.status().message();
  auto x = a.allocate(10);
  ASSERT_TRUE(x.ok());
  EXPECT_TRUE(a.release(*x).ok());
  EXPECT_EQ(a.release(*x).code(), ErrorCode::kInvalidArgument)
      << "double free is reported, not corrupting";
}

// Property: live ranges never overlap, stay inside the capacity and honour their alignment;
// `used` equals the sum of what is held; releasing everything restores one whole free range.
TEST(OffsetAllocator, RandomizedNeverOverlaps) {
  std::mt19937 rng(11);
  const uint64_t capacity = 1 << 20;
  OffsetAllocator a(capacity);
  struct Held {
    uint64_t offset, size;
  };
  std::vector<Held> held;
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 3 != 0) {
      const uint64_t size = 1 + rng() % 20000;
      const uint64_t alignment = uint64_t{1} << (rng() % 10);
      auto r = a.allocate(size, alignment);
      if (!r.ok()) {
        ASSERT_EQ(r.status().code(), ErrorCode::kResourceExhausted);
        ASSERT_LT(a.largest_free(), size + alignment) << "refused although a range fits";
        continue;
      }
      ASSERT_EQ(*r % alignment, 0u);
      ASSERT_LE(*r + size, capacity);
      for (const Held& h : held)
        ASSERT_TRUE(*r + size <= h.offset || h.offset + h.size <= *r) << "overlap";
      held.push_back({*r, size});
    } else {
      const size_t i = rng() % held.size();
      ASSERT_TRUE(a.release(held[i].offset).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    }
    ASSERT_EQ(a.live_allocations(), held.size());
    uint64_t sum = 0;
    for (const Held& h : held) sum += h.size;
    ASSERT_GE(a.used(), sum);
    ASSERT_LE(a.used(), a.capacity());
  }
  for (const Held& h : held) ASSERT_TRUE(a.release(h.offset).ok());
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.free_ranges(), 1u);
}

}  // namespace
}  // namespace rlt
