#include "cuda/runtime.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.h"

namespace rlt::cuda {
namespace {

TEST(DevicePool, CarvesAlignedBlocksAndReusesThem) {
  RLT_REQUIRE_CUDA_DEVICE();
  auto pool = DevicePool::create(size_t{1} << 20);
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  {
    auto a = (*pool)->allocate(1000, "a");
    auto b = (*pool)->allocate(5000, "b");
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 256, 0u);
    // The blocks are real device memory: a round trip through b keeps the bytes.
    std::vector<unsigned char> in(5000), out(5000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
    ASSERT_EQ(cudaMemcpy(b->data(), in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(out.data(), b->data(), out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(in, out);
    auto too_big = (*pool)->allocate(size_t{2} << 20, "the oversized buffer");
    ASSERT_FALSE(too_big.ok());
    EXPECT_NE(too_big.status().message().find("the oversized buffer"), std::string::npos);
  }
  EXPECT_EQ((*pool)->used(), 0u) << "blocks return to the pool when they go out of scope";
}

TEST(DeviceRuntime, StreamsEventsAndPinnedStaging) {
  RLT_REQUIRE_CUDA_DEVICE();
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  auto start = Event::create(true), end = Event::create(true);
  ASSERT_TRUE(start.ok() && end.ok());
  PinnedBuffer pinned;
  ASSERT_TRUE(pinned.reserve(1 << 16).ok());
  auto device = DeviceAllocation::allocate(1 << 16, "copy target");
  ASSERT_TRUE(device.ok());
  for (int i = 0; i < (1 << 16); ++i) pinned.data()[i] = static_cast<std::byte>(i);
  ASSERT_TRUE(start->record(stream->handle()).ok());
  ASSERT_EQ(cudaMemcpyAsync(device->data(), pinned.data(), 1 << 16, cudaMemcpyHostToDevice,
                            stream->handle()),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned.data(), device->data(), 1 << 16, cudaMemcpyDeviceToHost,
                            stream->handle()),
            cudaSuccess);
  ASSERT_TRUE(end->record(stream->handle()).ok());
  ASSERT_TRUE(end->synchronize().ok());
  EXPECT_EQ(pinned.data()[12345], static_cast<std::byte>(12345 & 0xff));
  auto ms = Event::elapsed_ms(*start, *end);
  ASSERT_TRUE(ms.ok());
  EXPECT_GE(*ms, 0.0f);
}

TEST(DeviceRuntime, OutOfMemoryIsAClearError) {
  RLT_REQUIRE_CUDA_DEVICE();
  auto huge = DeviceAllocation::allocate(size_t{1} << 50, "an impossible KV cache");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("an impossible KV cache"), std::string::npos);
  // The failure is not sticky: the next allocation works.
  EXPECT_TRUE(DeviceAllocation::allocate(1024, "small").ok());
}

}  // namespace
}  // namespace rlt::cuda
