// Linear-layer throughput against same-run references, at Ouro-1.4B shapes:
//   GEMV (one token, decode): weight bytes streamed per second vs the copy bandwidth
//   GEMM (prefill rows): GFLOP/s vs OpenBLAS f32 sgemm on the same shape
// "bf16·bf16" rows: bf16 weights with activations rounded to bf16 (the AVX512_BF16 dot-product
// kernel, opt-in with --activation-dtype bf16), where the CPU has it. "pending" rows: bf16 weights
// whose packing is deferred (computed from the source rows, as a first start does until the
// engine has packed them; docs/loading.md).
// Usage: rlt_bench_linear [--quick]
#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <vector>

#include "bandwidth_probe.h"
#include "common/half.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"

namespace {

using namespace rlt;

struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> half;
  kernels::WeightMatrix view;
  kernels::PackedMatrix packed;
};

// A weight dtype, and for bf16 whether activations are rounded to bf16 (the dot-product kernel).
struct Kind {
  const char* label;
  DType dtype;
  bool bf16_activations;
  bool deferred = false;
};

Weights make_weights(const Kind& kind, int64_t rows, int64_t cols) {
  const DType dtype = kind.dtype;
  Weights w;
  static std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  const size_t n = static_cast<size_t>(rows * cols);
  if (dtype == DType::kF32) {
    w.f32.resize(n);
    for (auto& x : w.f32) x = u(rng);
    w.view = {dtype, rows, cols, w.f32.data()};
  } else {
    w.half.resize(n);
    for (auto& x : w.half) x = dtype == DType::kBF16 ? f32_to_bf16(u(rng)) : f32_to_f16(u(rng));
    w.view = {dtype, rows, cols, w.half.data()};
  }
  w.packed = kernels::PackedMatrix::pack(
      w.view, {.bf16_activations = kind.bf16_activations, .rows_in_place = kind.deferred});
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 7;
  fmt::print("threads: {}, kernels: {}\n", omp_get_max_threads(), kernels::cpu_dispatch_target());
  const double copy = bench::copy_bandwidth_gbs();
  fmt::print("copy bandwidth (read+write): {:.1f} GB/s\n\n", copy);
  struct Shape {
    const char* name;
    int64_t out, in;
  };
  const Shape shapes[] = {{"q/k/v/o 2048x2048", 2048, 2048}, {"gate/up 5632x2048", 5632, 2048},
                          {"down 2048x5632", 2048, 5632}, {"lm_head 49152x2048", 49152, 2048}};
  // Decode streams every weight once per token, never from cache: each timed pass walks enough
  // distinct copies of the matrix (>= 256 MiB in all) that none of it survives in the caches.
  // Each pass is judged against a copy probe taken right before it (median of adjacent ratios).
  std::vector<Kind> kinds = {{"bf16", DType::kBF16, false},
                             {"pending", DType::kBF16, false, true},
                             {"f16", DType::kF16, false},
                             {"f32", DType::kF32, false}};
  if (kernels::bf16_dot_supported()) kinds.push_back({"bf16·bf16", DType::kBF16, true});  // bf16 activations
  fmt::print("{:<32} {:<9} {:>10} {:>10}\n", "GEMV (1 row, from memory)", "weights", "GB/s", "of copy");
  for (const Shape& s : shapes) {
    for (const Kind& kind : kinds) {
      if (quick && kind.dtype != DType::kBF16) continue;
      const int64_t one = s.out * s.in * static_cast<int64_t>(dtype_size(kind.dtype));
      const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / one + 1);
      std::vector<Weights> ws;
      for (int64_t i = 0; i < copies; ++i) ws.push_back(make_weights(kind, s.out, s.in));
      std::vector<float> x(static_cast<size_t>(s.in), 0.5f), y(static_cast<size_t>(s.out));
      const auto bytes = static_cast<double>(copies * ws.front().packed.bytes());
      const bench::VersusCopy r = bench::median_versus_copy(reps, bytes, [&] {
        for (const Weights& w : ws) kernels::linear(x.data(), 1, w.packed, y.data());
      });
      fmt::print("{:<32} {:<9} {:>10.1f} {:>9.0f}%\n", s.name, kind.label, r.gbs, 100.0 * r.ratio);
    }
  }
  fmt::print("\n{:<32} {:<9} {:>10} {:>10} {:>10}\n", "GEMM", "weights", "GFLOP/s", "sgemm", "ratio");
  for (int64_t m : {64, 256, 512}) {
    for (const Shape& s : {shapes[0], shapes[1], shapes[2]}) {
      const double ref = bench::sgemm_gflops(static_cast<int>(m), static_cast<int>(s.out), static_cast<int>(s.in), reps);
      for (const Kind& kind : kinds) {
        if (quick && kind.dtype != DType::kBF16) continue;
        Weights w = make_weights(kind, s.out, s.in);
        std::vector<float> x(static_cast<size_t>(m * s.in), 0.5f), y(static_cast<size_t>(m * s.out));
        const double secs = bench::best_seconds(reps, [&] { kernels::linear(x.data(), m, w.packed, y.data()); });
        const double gf = 2.0 * static_cast<double>(m * s.out * s.in) / secs / 1e9;
        fmt::print("{:<32} {:<9} {:>10.1f} {:>10.1f} {:>9.0f}%\n", fmt::format("m={} {}", m, s.name), kind.label, gf,
                   ref, 100.0 * gf / ref);
      }
    }
  }
  return 0;
}
