#include "cuda/runtime.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.h"

namespace rlt::cuda {
namespace {

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
