#include "kernels/cpu/memory_probe.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace rlt::kernels {

double copy_bandwidth_gbs(size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int threads = omp_get_max_threads();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int t = 0; t < threads; ++t) {
      const size_t chunk = bytes / static_cast<size_t>(threads),
                   begin = chunk * static_cast<size_t>(t);
      std::memcpy(dst.data() + begin, src.data() + begin, t == threads - 1 ? bytes - begin : chunk);
    }
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

}  // namespace rlt::kernels
