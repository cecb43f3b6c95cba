// bf16 GEMV on the GPU at Ouro-1.4B decode shapes, against the device's copy bandwidth measured
// in the same run (cudaMemcpy device to device, read + write). Each timed pass walks enough
// distinct copies of the matrix (>= 1 GiB) that none of it is served from L2.
// Also batch 1's fused forms (gate/up with the SwiGLU, qkv opening with the residual and norm),
// each against the two launches it replaces.
// Usage: rlt_bench_cuda_gemv
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "cuda/gemv_bf16.h"
#include "cuda/model_kernels.h"
#include "cuda_bench_util.h"

using rlt::bench_cuda::best_ms;
using rlt::bench_cuda::check;

int main() {
  if (!rlt::bench_cuda::print_device()) return 0;
  const size_t copy_bytes = size_t{1} << 30;
  const double copy_gbs = rlt::cuda::copy_bandwidth_gbs(copy_bytes);
  fmt::print("copy bandwidth (read + write): {:.0f} GB/s\n\n{:<24} {:>10} {:>9}\n", copy_gbs,
             "GEMV bf16", "GB/s", "of copy");
  void* a = nullptr;  // the weights: >= 1 GiB of distinct copies per pass
  if (!check(cudaMalloc(&a, copy_bytes), "cudaMalloc")) return 1;
  cudaMemset(a, 1, copy_bytes);
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"q/k/v/o 2048x2048", 2048, 2048},
                          {"gate/up 5632x2048", 5632, 2048},
                          {"down 2048x5632", 2048, 5632},
                          {"lm_head 49152x2048", 49152, 2048}};
  float *x = nullptr, *y = nullptr;
  if (!check(cudaMalloc(&x, 8192 * sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&y, 49152 * sizeof(float)), "cudaMalloc"))
    return 1;
  cudaMemset(x, 0, 8192 * sizeof(float));
  // One row of the table: the best time of launch(weights) over every distinct copy of a
  // `one`-byte matrix, as the weights' bytes per second (a fused form and the launches it
  // replaces read the same bytes, so the launch it saves shows as bandwidth).
  auto measure = [&](const char* name, size_t one, auto&& launch) {
    const size_t copies = std::max<size_t>(1, copy_bytes / one);
    const auto* w = static_cast<const uint16_t*>(a);
    const float ms = best_ms(5, [&] {
      for (size_t i = 0; i < copies; ++i) launch(w + i * one / 2);
    });
    if (!check(cudaGetLastError(), name)) return false;
    const double gbs = static_cast<double>(copies * one) / (ms * 1e-3) / 1e9;
    fmt::print("{:<24} {:>10.0f} {:>8.0f}%\n", name, gbs, 100.0 * gbs / copy_gbs);
    return true;
  };
  auto bytes = [](int64_t rows, int64_t cols) {
    return static_cast<size_t>(rows * cols) * sizeof(uint16_t);
  };
  for (const Shape& s : shapes) {
    if (!measure(s.name, bytes(s.rows, s.cols), [&](const uint16_t* w) {
          (void)rlt::cuda::gemv_bf16(w, x, y, s.rows, s.cols, nullptr);
        }))
      return 1;
  }
  // Batch 1's MLP input side: the stacked gate/up matrix with the SwiGLU fused into the GEMV,
  // against the GEMV over both halves followed by the SwiGLU kernel.
  const int64_t inter = 5632, hidden = 2048;
  if (!measure("gate/up+SwiGLU fused", bytes(2 * inter, hidden),
               [&](const uint16_t* w) {
                 (void)rlt::cuda::gemv_bf16_swiglu(w, x, y, inter, hidden, nullptr);
               }) ||
      !measure("gate/up, then SwiGLU", bytes(2 * inter, hidden), [&](const uint16_t* w) {
        (void)rlt::cuda::gemv_bf16(w, x, y, 2 * inter, hidden, nullptr);
        (void)rlt::cuda::silu_mul(y, 1, inter, y + 2 * inter, rlt::cuda::ElementType::kF32,
                                  nullptr);
      }))
    return 1;
  // Batch 1's qkv projection opening with the previous sublayer's residual and the input norm,
  // against the residual-norm kernel followed by the GEMV.
  const int64_t qkv_rows = 6144;
  float* rows_in = nullptr;  // h, the sublayer output, the two norm weights: zeros
  unsigned* done = nullptr;
  if (!check(cudaMalloc(&rows_in, 4 * hidden * sizeof(float)), "cudaMalloc") ||
      !check(cudaMalloc(&done, sizeof(unsigned)), "cudaMalloc"))
    return 1;
  cudaMemset(rows_in, 0, 4 * hidden * sizeof(float));
  cudaMemset(done, 0, sizeof(unsigned));
  const rlt::cuda::ResidualNorm rn{
      rows_in, rows_in + hidden, rows_in + 2 * hidden, rows_in + 3 * hidden, 1e-6f, done};
  if (!measure("norm+qkv fused", bytes(qkv_rows, hidden),
               [&](const uint16_t* w) {
                 (void)rlt::cuda::gemv_bf16_residual_norm(w, qkv_rows, hidden, rn, y, nullptr);
               }) ||
      !measure("norm, then qkv", bytes(qkv_rows, hidden), [&](const uint16_t* w) {
        (void)rlt::cuda::add_rms_norm_then_norm(rn.h, rn.sublayer, rn.out_norm, rn.next_norm, 1,
                                                hidden, rn.eps, x, rlt::cuda::ElementType::kF32,
                                                nullptr);
        (void)rlt::cuda::gemv_bf16(w, x, y, qkv_rows, hidden, nullptr);
      }))
    return 1;
  cudaFree(rows_in);
  cudaFree(done);
  cudaFree(a);
  cudaFree(x);
  cudaFree(y);
  return 0;
}
