// Per-row work of a forward pass (norms, residual adds, RoPE, K/V stores) spread over the OpenMP
// threads once a batch is large enough to pay for a parallel region. Each row is still computed
// whole by one thread in its own fixed order, so results never depend on the thread count.
#pragma once

#include <cstdint>

namespace rlt::kernels {

// From this many values (~30–60 µs of per-row work on one thread) a parallel region pays: a
// prompt's 512 rows of 576 do, a decode step's few rows stay on the calling thread, where a
// region would cost more than it saves (and a descheduled worker could stall it).
inline constexpr int64_t kParallelRowValues = int64_t{1} << 16;

// f(r) for every r in [0, rows); `values_per_row` sizes the work to decide whether to go parallel.
template <class F>
void parallel_rows(int64_t rows, int64_t values_per_row, F&& f) {
  const bool parallel = rows > 1 && rows * values_per_row >= kParallelRowValues;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

// f(begin, end) for consecutive blocks of `block` items covering [0, n) (the last one shorter),
// spread over the threads as parallel_rows spreads rows.
template <class F>
void parallel_blocks(int64_t n, int64_t block, int64_t values_per_item, F&& f) {
  parallel_rows((n + block - 1) / block, block * values_per_item, [&](int64_t b) {
    const int64_t begin = b * block;
    f(begin, begin + block < n ? begin + block : n);
  });
}

}  // namespace rlt::kernels
