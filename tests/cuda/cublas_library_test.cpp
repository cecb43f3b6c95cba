// cuBLAS is opened at run time (cuda/cublas_library.h): every entry point rlt calls resolves, with
// or without a device (loading needs none; the GPU tests use it for real).
#include "cuda/cublas_library.h"

#include <gtest/gtest.h>

namespace rlt::cuda {
namespace {

TEST(CublasLibrary, LoadsOnceWithEveryEntryPoint) {
  auto api = cublas_library();
  ASSERT_TRUE(api.ok()) << api.status().to_string();
  const CublasLibrary& l = **api;
  EXPECT_NE(l.create, nullptr);
  EXPECT_NE(l.destroy, nullptr);
  EXPECT_NE(l.set_stream, nullptr);
  EXPECT_NE(l.set_workspace, nullptr);
  EXPECT_NE(l.gemm_ex, nullptr);
  ASSERT_NE(l.status_name, nullptr);
  EXPECT_STREQ(l.status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  auto again = cublas_library();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *api);
}

}  // namespace
}  // namespace rlt::cuda
