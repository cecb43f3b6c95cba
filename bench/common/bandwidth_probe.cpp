#include "bandwidth_probe.h"

#include <cblas.h>

#include <vector>

#include "kernels/cpu/memory_probe.h"

namespace rlt::bench {

double copy_bandwidth_gbs(size_t bytes, int reps) { return kernels::copy_bandwidth_gbs(bytes, reps); }

double sgemm_gflops(int m, int n, int k, int reps) {
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f), b(static_cast<size_t>(k) * n, 0.25f), c(static_cast<size_t>(m) * n);
  const double s = best_seconds(reps, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  });
  return 2.0 * m * n * k / s / 1e9;
}

}  // namespace rlt::bench
