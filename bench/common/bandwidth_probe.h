// Same-run references for benchmarks: the machine's copy bandwidth and OpenBLAS's f32 GEMM rate.
#pragma once

#include <cstddef>

namespace rlt::bench {

// STREAM-style copy with all OpenMP threads: (bytes read + bytes written) per second, best of
// `reps`, over a buffer far larger than the caches.
double copy_bandwidth_gbs(size_t bytes = size_t{512} << 20, int reps = 5);

// OpenBLAS sgemm GFLOP/s for an m x n x k product (best of `reps`).
double sgemm_gflops(int m, int n, int k, int reps = 5);

// Seconds of the best of `reps` runs of fn().
template <typename Fn>
double best_seconds(int reps, Fn&& fn);

}  // namespace rlt::bench

#include <algorithm>
#include <chrono>

template <typename Fn>
double rlt::bench::best_seconds(int reps, Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
