#include "bandwidth_probe.h"

#include <cblas.h>
#include <omp.h>

#include <cstring>
#include <vector>

namespace rlt::bench {

double copy_bandwidth_gbs(size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int threads = omp_get_max_threads();
  const double s = best_seconds(reps, [&] {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < threads; ++t) {
      const size_t chunk = bytes / threads, begin = chunk * t;
      std::memcpy(dst.data() + begin, src.data() + begin, t == threads - 1 ? bytes - begin : chunk);
    }
  });
  return 2.0 * static_cast<double>(bytes) / s / 1e9;
}

double sgemm_gflops(int m, int n, int k, int reps) {
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), b(static_cast<size_t>(k) * n, 0.25f), c(static_cast<size_t>(m) * n);
  const double s = best_seconds(reps, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  });
  return 2.0 * m * n * k / s / 1e9;
}

}  // namespace rlt::bench
