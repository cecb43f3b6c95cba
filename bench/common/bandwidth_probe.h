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

// A memory-bound kernel against the copy probe on a shared machine: each of `reps` runs of fn()
// (which moves `bytes`) is measured right after a copy probe, and the ratio of the two is kept.
// Available bandwidth drifts while other processes run; the median ratio of adjacent
// measurements is what stays stable.
struct VersusCopy {
  double gbs = 0;    // median rate of fn
  double ratio = 0;  // median of (fn GB/s / copy GB/s) over adjacent pairs
};
template <typename Fn>
VersusCopy median_versus_copy(int reps, double bytes, Fn&& fn);

}  // namespace rlt::bench

#include <algorithm>
#include <chrono>
#include <vector>

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

template <typename Fn>
rlt::bench::VersusCopy rlt::bench::median_versus_copy(int reps, double bytes, Fn&& fn) {
  std::vector<double> ratios, rates;
  for (int i = 0; i < reps; ++i) {
    const double copy = copy_bandwidth_gbs(size_t{256} << 20, 3);
    const double secs = best_seconds(1, fn);
    rates.push_back(bytes / secs / 1e9);
    ratios.push_back(rates.back() / copy);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], ratios[ratios.size() / 2]};
}
