#include "cuda/device.h"

#include <gtest/gtest.h>

namespace rlt::cuda {
namespace {

TEST(CudaDevice, ListingNeverFailsAndExplainsAnEmptyList) {
  const DeviceList list = list_devices();
  if (list.devices.empty()) {
    EXPECT_FALSE(list.why_none.empty());
  } else {
    for (const DeviceInfo& d : list.devices) {
      EXPECT_FALSE(d.name.empty());
      EXPECT_GE(d.compute_major, 7);
      EXPECT_GT(d.memory_bytes, 0);
    }
  }
}

TEST(CudaDevice, ReportsCompiledArchitectures) {
  // Non-empty and in sm_NN form (a build may narrow CMAKE_CUDA_ARCHITECTURES to one card).
  const std::string archs = compiled_architectures();
  EXPECT_EQ(archs.rfind("sm_", 0), 0u) << archs;
}

TEST(CudaDevice, ErrorsNameWhatFailed) {
  EXPECT_TRUE(cuda_status(0, "x").ok());
  const Status s = cuda_status(2, "copying K/V");  // cudaErrorMemoryAllocation
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("copying K/V"), std::string::npos);
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace rlt::cuda
