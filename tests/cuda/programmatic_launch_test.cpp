// Programmatic dependent launch (cuda/launch.cuh) must keep stream order: each kernel may start
// launching early but waits for its producer's results. A chain of additions that each read the
// previous one's output over 16 MiB (many waves of blocks) gives exact Fibonacci numbers only if
// no kernel reads early, eagerly and replayed from a captured graph.
#include "cuda/programmatic_launch.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/model_kernels.h"
#include "cuda/runtime.h"
#include "device_buffer.h"
#include "gpu_test_util.h"
#include "pdl_probe.h"

namespace rlt::cuda {
namespace {

using testing::Dev;

TEST(ProgrammaticLaunch, IsASettingOfEachStream) {
  auto* first = reinterpret_cast<CUstream_st*>(0x1000);
  auto* second = reinterpret_cast<CUstream_st*>(0x2000);
  EXPECT_FALSE(programmatic_launch_enabled(first));
  set_programmatic_launch(first, true);
  set_programmatic_launch(first, true);  // idempotent
  EXPECT_TRUE(programmatic_launch_enabled(first));
  EXPECT_FALSE(programmatic_launch_enabled(second));
  set_programmatic_launch(first, false);
  EXPECT_FALSE(programmatic_launch_enabled(first));
}

TEST(ProgrammaticLaunch, DestroyingAStreamClearsItsSetting) {
  RLT_REQUIRE_CUDA_DEVICE();
  CUstream_st* handle = nullptr;
  {
    auto stream = Stream::create();
    ASSERT_TRUE(stream.ok());
    handle = stream->handle();
    set_programmatic_launch(handle, true);
    EXPECT_TRUE(programmatic_launch_enabled(handle));
  }
  EXPECT_FALSE(programmatic_launch_enabled(handle));  // a new stream may reuse the handle
}

// Why this device cannot use programmatic dependent launch, or empty when it can.
std::string why_no_programmatic_launch() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return "cannot read the device's compute capability";
  if (major < 9) return "programmatic dependent launch needs sm_90 or newer";
  const auto waits = kernels_wait_for_upstream();
  if (!waits.ok()) return waits.status().to_string();
  if (!*waits) return "this device runs the kernels from pre-sm_90 code: no wait in them";
  return {};
}

// a += b, b += a, ... `steps` times, queued on `stream`.
void queue_chain(float* a, float* b, int64_t n, int steps, CUstream_st* stream) {
  for (int s = 0; s < steps; ++s) {
    ASSERT_TRUE((s % 2 == 0 ? add_in_place(a, b, n, stream) : add_in_place(b, a, n, stream)).ok());
  }
}

// The mechanism itself: with the setting on, the consumer starts while the producer still runs
// (programmatic launch is active) and yet reads the producer's value (its wait holds); with it
// off, the consumer starts after the producer, as plain stream order has it.
TEST(ProgrammaticLaunch, ConsumersStartEarlyAndStillWait) {
  RLT_REQUIRE_CUDA_DEVICE();
  if (const std::string why = why_no_programmatic_launch(); !why.empty()) GTEST_SKIP() << why;
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  auto plain = testing::run_pdl_probe(stream->handle());
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->value_seen, 42);
  EXPECT_FALSE(plain->consumer_started_first) << "without the setting, stream order holds";
  set_programmatic_launch(stream->handle(), true);
  for (int i = 0; i < 3; ++i) {
    auto early = testing::run_pdl_probe(stream->handle());
    ASSERT_TRUE(early.ok()) << early.status().to_string();
    EXPECT_EQ(early->value_seen, 42) << "the consumer read before its producer finished";
    EXPECT_TRUE(early->consumer_started_first) << "programmatic launch did not take effect";
  }
  set_programmatic_launch(stream->handle(), false);
}

TEST(ProgrammaticLaunch, DependentKernelsSeeTheirProducersResults) {
  RLT_REQUIRE_CUDA_DEVICE();
  if (const std::string why = why_no_programmatic_launch(); !why.empty()) GTEST_SKIP() << why;
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  set_programmatic_launch(stream->handle(), true);
  constexpr int64_t n = int64_t{1} << 22;
  constexpr int steps = 30;  // F(32) = 2,178,309: exact in f32
  double x = 1, y = 1;
  for (int s = 0; s < steps; ++s) (s % 2 == 0 ? x : y) = x + y;
  const std::vector<float> ones(n, 1.0f);
  for (bool graph : {false, true}) {
    Dev<float> a(ones), b(ones);
    if (graph) {
      cudaGraph_t captured = nullptr;
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaStreamBeginCapture(stream->handle(), cudaStreamCaptureModeThreadLocal),
                cudaSuccess);
      queue_chain(a.p(), b.p(), n, steps, stream->handle());
      ASSERT_EQ(cudaStreamEndCapture(stream->handle(), &captured), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, captured, 0), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream->handle()), cudaSuccess);
      ASSERT_TRUE(stream->synchronize().ok());
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(captured);
    } else {
      queue_chain(a.p(), b.p(), n, steps, stream->handle());
      ASSERT_TRUE(stream->synchronize().ok());
    }
    const std::vector<float> ra = a.read(n), rb = b.read(n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(ra[i], static_cast<float>(x)) << "graph " << graph << " element " << i;
      ASSERT_EQ(rb[i], static_cast<float>(y)) << "graph " << graph << " element " << i;
    }
  }
  set_programmatic_launch(stream->handle(), false);
}

}  // namespace
}  // namespace rlt::cuda
