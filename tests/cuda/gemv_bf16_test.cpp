#include "cuda/gemv_bf16.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "cuda/model_kernels.h"
#include "cuda/programmatic_launch.h"
#include "cuda/runtime.h"
#include "gpu_test_util.h"

namespace rlt::cuda {
namespace {

// Device memory for a test, freed on scope exit.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  explicit DeviceArray(const std::vector<T>& host) {
    EXPECT_EQ(cudaMalloc(&ptr, host.size() * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr); }
};

// Same bound as the CPU kernels: the f32 sum of k products is within 8·k·2⁻²⁴·Σ|x·w| of float64.
TEST(GemvBf16, MatchesFloat64OnOuroShapesAndOddSizes) {
  RLT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  const int64_t shapes[][2] = {{1, 1},       {7, 13},      {33, 256},   {100, 1000},
                               {2048, 2048}, {5632, 2048}, {2048, 5632}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
    std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
    for (auto& v : w) v = f32_to_bf16(dist(rng));
    for (auto& v : x) v = dist(rng);
    DeviceArray<uint16_t> dw(w);
    DeviceArray<float> dx(x), dy(y);
    ASSERT_TRUE(gemv_bf16(dw.ptr, dx.ptr, dy.ptr, rows, cols, nullptr).ok());
    ASSERT_EQ(cudaMemcpy(y.data(), dy.ptr, y.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0, magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = double(bf16_to_f32(w[r * cols + c])) * double(x[c]);
        exact += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(y[r], exact, 8.0 * double(cols) * 0x1p-24 * magnitude + 1e-30)
          << rows << "x" << cols << " row " << r;
    }
  }
}

// The fused decode path (gate/up GEMV applying the SwiGLU) must give exactly the unfused path's
// bits: same per-row summation, same activation expression.
TEST(GemvBf16, SwigluFusionEqualsGemvThenSiluMulBitForBit) {
  RLT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(11);
  std::normal_distribution<float> dist;
  const int64_t shapes[][2] = {{1, 1}, {7, 13}, {33, 256}, {100, 1000}, {5632, 2048}};
  for (const auto& s : shapes) {
    const int64_t inter = s[0], cols = s[1];
    std::vector<uint16_t> w(static_cast<size_t>(2 * inter * cols));
    std::vector<float> x(static_cast<size_t>(cols));
    for (auto& v : w) v = f32_to_bf16(dist(rng));
    for (auto& v : x) v = dist(rng);
    std::vector<float> fused(static_cast<size_t>(inter)), unfused(fused.size());
    std::vector<float> gate_up(static_cast<size_t>(2 * inter));
    DeviceArray<uint16_t> dw(w);
    DeviceArray<float> dx(x), dfused(fused), dunfused(unfused), dgate_up(gate_up);
    ASSERT_TRUE(gemv_bf16_swiglu(dw.ptr, dx.ptr, dfused.ptr, inter, cols, nullptr).ok());
    ASSERT_TRUE(gemv_bf16(dw.ptr, dx.ptr, dgate_up.ptr, 2 * inter, cols, nullptr).ok());
    ASSERT_TRUE(silu_mul(dgate_up.ptr, 1, inter, dunfused.ptr, ElementType::kF32, nullptr).ok());
    ASSERT_EQ(
        cudaMemcpy(fused.data(), dfused.ptr, fused.size() * sizeof(float), cudaMemcpyDeviceToHost),
        cudaSuccess);
    ASSERT_EQ(cudaMemcpy(unfused.data(), dunfused.ptr, unfused.size() * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < inter; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(fused[static_cast<size_t>(i)]),
                std::bit_cast<uint32_t>(unfused[static_cast<size_t>(i)]))
          << inter << "x" << cols << " activation " << i << ": " << fused[static_cast<size_t>(i)]
          << " vs " << unfused[static_cast<size_t>(i)];
    }
  }
}

template <typename T>
std::vector<T> read(const DeviceArray<T>& d, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), d.ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

// Why this device cannot use programmatic dependent launch, or empty when it can.
std::string why_no_programmatic_launch() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return "cannot read the device's compute capability";
  return major < 9 ? "programmatic dependent launch needs sm_90 or newer" : "";
}

// The decode path that folds a sublayer's residual and the next norm into the next GEMV must give
// exactly the unfused path's bits: h after the residual, and the projection (plain or SwiGLU).
// Each shape runs twice, so the second launch shows that the first left its counter at zero; on
// sm_90+ everything runs a second time on a stream with programmatic dependent launch, each step
// right behind the kernel that produces its sublayer input (the fused kernel reads weights
// before its wait, and must not read that input before it).
TEST(GemvBf16, ResidualNormFusionEqualsTheUnfusedKernelsBitForBit) {
  RLT_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(17);
  std::normal_distribution<float> dist;
  const float eps = 1e-6f;
  struct Shape {
    int64_t outputs, cols;
    bool swiglu;
  };
  const Shape shapes[] = {{1, 2048, false},    {7, 100, false},  {300, 96, false},
                          {6144, 2048, false}, {1, 2048, true},  {33, 100, true},
                          {5632, 2048, true},  {40, 6144, false}};
  DeviceArray<unsigned> done(std::vector<unsigned>{0u});
  auto stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  std::vector<bool> pdl_modes = {false};
  if (why_no_programmatic_launch().empty()) pdl_modes.push_back(true);
  for (const bool pdl : pdl_modes) {
    set_programmatic_launch(stream->handle(), pdl);
    CUstream_st* const s_handle = stream->handle();
    for (const Shape& s : shapes) {
      const int64_t n = s.cols, weight_rows = s.swiglu ? 2 * s.outputs : s.outputs;
      std::vector<uint16_t> w(static_cast<size_t>(weight_rows * n));
      for (auto& v : w) v = f32_to_bf16(dist(rng));
      std::vector<float> h(static_cast<size_t>(n)), sub(h.size()), out_w(h.size()),
          next_w(h.size()), step(h.size());
      for (auto* v : {&h, &sub, &out_w, &next_w, &step})
        for (float& e : *v) e = dist(rng);
      DeviceArray<uint16_t> dw(w);
      DeviceArray<float> dsub(sub), dout_w(out_w), dnext_w(next_w), dstep(step);
      DeviceArray<float> h_fused(h), h_plain(h), normed(h);
      DeviceArray<float> y_fused(std::vector<float>(static_cast<size_t>(s.outputs), -1.0f));
      DeviceArray<float> y_plain(std::vector<float>(static_cast<size_t>(s.outputs), -2.0f));
      for (int pass = 0; pass < 2; ++pass) {
        const std::string what = fmt::format("{} x {}{} pass {}{}", s.outputs, n,
                                             s.swiglu ? " swiglu" : "", pass, pdl ? " pdl" : "");
        const ResidualNorm rn{h_fused.ptr, dsub.ptr, dout_w.ptr, dnext_w.ptr, eps, done.ptr};
        // The sublayer input changes right before each consumer.
        ASSERT_TRUE(add_in_place(dsub.ptr, dstep.ptr, n, s_handle).ok()) << what;
        if (s.swiglu) {
          ASSERT_TRUE(
              gemv_bf16_residual_norm_swiglu(dw.ptr, s.outputs, n, rn, y_fused.ptr, s_handle).ok());
        } else {
          ASSERT_TRUE(
              gemv_bf16_residual_norm(dw.ptr, s.outputs, n, rn, y_fused.ptr, s_handle).ok());
        }
        ASSERT_TRUE(add_rms_norm_then_norm(h_plain.ptr, dsub.ptr, dout_w.ptr, dnext_w.ptr, 1, n,
                                           eps, normed.ptr, ElementType::kF32, s_handle)
                        .ok());
        if (s.swiglu) {
          ASSERT_TRUE(
              gemv_bf16_swiglu(dw.ptr, normed.ptr, y_plain.ptr, s.outputs, n, s_handle).ok());
        } else {
          ASSERT_TRUE(gemv_bf16(dw.ptr, normed.ptr, y_plain.ptr, s.outputs, n, s_handle).ok());
        }
        ASSERT_EQ(cudaStreamSynchronize(s_handle), cudaSuccess) << what;
        ASSERT_EQ(bits(read(h_fused, h.size())), bits(read(h_plain, h.size()))) << what;
        ASSERT_EQ(bits(read(y_fused, static_cast<size_t>(s.outputs))),
                  bits(read(y_plain, static_cast<size_t>(s.outputs))))
            << what;
        ASSERT_EQ(read(done, 1)[0], 0u) << what;
      }
    }
  }
  set_programmatic_launch(stream->handle(), false);
  EXPECT_FALSE(gemv_residual_norm_supported(6145));
}

}  // namespace
}  // namespace rlt::cuda
