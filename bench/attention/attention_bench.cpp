// Attention throughput against same-run references:
//   decode  cpu_flash K/V read bandwidth vs the machine's copy bandwidth (contexts >= 4096),
//           as the median ratio of adjacent measurements
//   prefill cpu_flash and cpu_reference GFLOP/s vs OpenBLAS f32 sgemm
// Usage: rlt_bench_attention [--quick]
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "bandwidth_probe.h"
#include "paged_test_data.h"

namespace {

using namespace rlt;
using namespace rlt::attention;

struct Shape {
  int32_t seqs, context, q_heads, kv_heads, head_dim, block_size;
  DType dtype;
};

// One single-query row per sequence at the end of its context (decode). Each repetition is
// measured right after a copy probe and the ratio of the two is kept: on a shared machine the
// available bandwidth drifts, and the median ratio of adjacent measurements is what is stable.
struct DecodeResult {
  double gbs = 0;
  double ratio = 0;  // median of (decode GB/s / copy GB/s) over adjacent pairs
};

DecodeResult decode_vs_copy(const Shape& s, AttentionBackend& backend, int reps) {
  std::mt19937 rng(1);
  const int32_t width = (s.context + s.block_size - 1) / s.block_size;
  const int32_t blocks = s.seqs * width;
  testing::PagedPools pools(s.dtype, blocks, s.block_size, s.kv_heads, s.head_dim, rng);
  std::vector<int32_t> lengths(static_cast<size_t>(s.seqs), s.context);
  std::vector<int32_t> tables = testing::random_tables(lengths, s.block_size, blocks, width, -1, rng);
  // Distinct blocks per sequence so every byte read is real traffic, not a cache hit.
  for (int32_t q = 0; q < s.seqs; ++q)
    for (int32_t b = 0; b < width; ++b) tables[q * width + b] = q * width + b;
  std::vector<float> q(static_cast<size_t>(s.seqs) * s.q_heads * s.head_dim, 0.1f), out(q.size());
  AttentionParams p;
  p.q = q.data();
  p.out = out.data();
  p.rows = p.num_seqs = s.seqs;
  p.num_q_heads = s.q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = tables.data();
  p.table_width = width;
  p.context_lengths = lengths.data();
  const double bytes = 2.0 * s.seqs * s.context * s.kv_heads * s.head_dim * static_cast<double>(dtype_size(s.dtype));
  (void)run_attention(backend, p);  // warm-up
  const bench::VersusCopy r = bench::median_versus_copy(reps, bytes, [&] { (void)run_attention(backend, p); });
  return {r.gbs, r.ratio};
}

// One packed sequence of `context` query rows over its own context (a full causal prefill).
double prefill_gflops(const Shape& s, AttentionBackend& backend, int reps) {
  std::mt19937 rng(2);
  const int32_t width = (s.context + s.block_size - 1) / s.block_size;
  testing::PagedPools pools(s.dtype, width, s.block_size, s.kv_heads, s.head_dim, rng);
  std::vector<int32_t> lengths = {s.context};
  std::vector<int32_t> tables = testing::random_tables(lengths, s.block_size, width, width, -1, rng);
  std::vector<int32_t> cu = {0, s.context};
  std::vector<float> q(static_cast<size_t>(s.context) * s.q_heads * s.head_dim, 0.1f), out(q.size());
  AttentionParams p;
  p.q = q.data();
  p.out = out.data();
  p.rows = s.context;
  p.num_seqs = 1;
  p.num_q_heads = s.q_heads;
  p.k = pools.k;
  p.v = pools.v;
  p.block_tables = tables.data();
  p.table_width = width;
  p.context_lengths = lengths.data();
  p.cu_seqlens_q = cu.data();
  p.max_seqlen_q = s.context;
  const double secs = bench::best_seconds(reps, [&] { (void)run_attention(backend, p); });
  // Causal: query j attends to j + 1 keys; QK and PV cost 2 flops per (key, dim) each.
  const double pairs = 0.5 * s.context * (s.context + 1.0);
  return 4.0 * pairs * s.head_dim * s.q_heads / secs / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 2 : 5;
  auto flash = make_cpu_flash_backend();
  auto reference = make_cpu_reference_backend();
  fmt::print("threads: {}\n", omp_get_max_threads());
  const double copy = bench::copy_bandwidth_gbs();
  fmt::print("copy bandwidth (read+write): {:.1f} GB/s\n\n", copy);
  fmt::print("{:<44} {:>10} {:>12}\n", "decode (Ouro-1.4B heads: 16 x 128, bf16 K/V)", "GB/s", "of copy");
  for (int32_t ctx : {4096, 8192, 16384}) {
    if (quick && ctx > 4096) break;
    for (int32_t seqs : {1, 8}) {
      const Shape s{seqs, ctx, 16, 16, 128, 16, DType::kBF16};
      const DecodeResult r = decode_vs_copy(s, *flash, quick ? 3 : 7);
      fmt::print("{:<44} {:>10.1f} {:>11.0f}%\n", fmt::format("cpu_flash batch {} context {}", seqs, ctx), r.gbs,
                 100.0 * r.ratio);
    }
  }
  const double sgemm = bench::sgemm_gflops(1024, 1024, 1024, reps);
  fmt::print("\nOpenBLAS sgemm 1024^3: {:.1f} GFLOP/s\n", sgemm);
  fmt::print("{:<44} {:>10} {:>12}\n", "prefill (causal, 16 x 128 heads, bf16 K/V)", "GFLOP/s", "of sgemm");
  for (int32_t n : {512, 1024, 2048}) {
    if (quick && n > 512) break;
    const Shape s{1, n, 16, 16, 128, 16, DType::kBF16};
    const double f = prefill_gflops(s, *flash, reps);
    fmt::print("{:<44} {:>10.1f} {:>11.0f}%\n", fmt::format("cpu_flash prefill {}", n), f, 100.0 * f / sgemm);
    if (n <= 1024) {
      const double r = prefill_gflops(s, *reference, 1);
      fmt::print("{:<44} {:>10.1f} {:>11.0f}%   (flash is {:.1f}x)\n", fmt::format("cpu_reference prefill {}", n), r,
                 100.0 * r / sgemm, f / r);
    }
  }
  return 0;
}
