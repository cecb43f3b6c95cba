// The machine's memory bandwidth as a plain copy measures it, for rooflines taken in the same run
// as the measurement they judge (benchmarks and `rlt bench`).
#pragma once

#include <cstddef>

namespace rlt::kernels {

// STREAM-style copy with all OpenMP threads: (bytes read + bytes written) per second in GB/s,
// best of `reps`, over a buffer far larger than the caches.
double copy_bandwidth_gbs(size_t bytes = size_t{512} << 20, int reps = 5);

}  // namespace rlt::kernels
