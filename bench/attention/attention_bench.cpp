// Attention throughput against same-run references:
//   decode  cpu_flash K/V read bandwidth vs the machine's copy bandwidth, bf16, q8_0 and f32 K/V
//           (Ouro-1.4B, Llama-3-8B and SmolLM2-135M heads, contexts 512-16384), read from
//           memory as in an engine step (layers cycled through until 128 MiB are read),
//           as the median ratio of adjacent measurements
//   prefill cpu_flash and cpu_reference GFLOP/s vs OpenBLAS f32 sgemm; cpu_flash per K/V encoding
//   short   rows at the end of a short context (SmolLM2 heads): GFLOP/s, and the time of R rows
//           against one row (what a speculative verification's extra rows cost)
// Usage: rlt_bench_attention [--quick] [--short | --decode | --prefill]
//        [--heads ouro|llama3-8b|smollm2] [--kv-dtype bf16|q8_0|f32]
// (--short / --decode / --prefill: only that section; --heads / --kv-dtype: only those rows of the
// decode and per-encoding prefill tables)
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "attention/backend.h"
#include "bandwidth_probe.h"
#include "kv/kv_types.h"
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
  double ratio = 0;        // median of (decode GB/s / copy GB/s) over adjacent pairs
  double keys_per_us = 0;  // keys attended per microsecond (all sequences, K and V)
};

DecodeResult decode_vs_copy(const Shape& s, AttentionBackend& backend, int reps) {
  std::mt19937 rng(1);
  const int32_t width = (s.context + s.block_size - 1) / s.block_size;
  const int32_t blocks = s.seqs * width;
  const auto layer_bytes = static_cast<double>(
      kv::kv_value_bytes(s.dtype, int64_t{2} * s.seqs * s.context * s.kv_heads * s.head_dim));
  // A decode step reads every layer's K/V once, so a layer's rows are long gone from the caches
  // when its turn comes again: a call here walks enough layers (pools) to read 128 MiB, four
  // times the last-level cache of the machines measured, one attention call per layer.
  const int layers = std::max(1, static_cast<int>(std::ceil(double{128 << 20} / layer_bytes)));
  std::vector<std::unique_ptr<testing::PagedPools>> pools;
  for (int l = 0; l < layers; ++l)
    pools.push_back(std::make_unique<testing::PagedPools>(s.dtype, blocks, s.block_size, s.kv_heads,
                                                          s.head_dim, rng));
  std::vector<int32_t> lengths(static_cast<size_t>(s.seqs), s.context);
  std::vector<int32_t> tables = testing::random_tables(lengths, s.block_size, blocks, width, -1, rng);
  // Distinct blocks per sequence so every byte read is real traffic, not a cache hit.
  for (int32_t q = 0; q < s.seqs; ++q)
    for (int32_t b = 0; b < width; ++b) tables[q * width + b] = q * width + b;
  std::vector<float> q(static_cast<size_t>(s.seqs) * s.q_heads * s.head_dim, 0.1f), out(q.size());
  std::vector<AttentionParams> params;
  for (const auto& layer : pools)
    params.push_back(testing::paged_params(*layer, q.data(), out.data(), s.seqs, s.q_heads,
                                           tables.data(), width, lengths.data(), s.seqs));
  auto step = [&] {
    for (const AttentionParams& p : params) (void)run_attention(backend, p);
  };
  const double keys = double{1} * s.seqs * s.context * layers;
  const double bytes = layer_bytes * layers;
  step();  // warm-up
  const bench::VersusCopy r = bench::median_versus_copy(reps, bytes, step);
  return {r.gbs, r.ratio, keys / (bytes / (r.gbs * 1e9) * 1e6)};
}

// One sequence of `context` tokens with `rows` packed query rows at its end (rows = context: a
// full causal prefill), ready to run. Its parameters point into it: built in place, never moved.
struct TailRows {
  std::mt19937 rng;
  testing::PagedPools pools;
  std::vector<int32_t> lengths, tables, cu;
  std::vector<float> q, out;
  AttentionParams p;

  TailRows(const Shape& s, int32_t rows, uint32_t seed)
      : rng(seed),
        pools(s.dtype, (s.context + s.block_size - 1) / s.block_size, s.block_size, s.kv_heads, s.head_dim, rng),
        lengths{s.context},
        cu{0, rows},
        q(static_cast<size_t>(rows) * s.q_heads * s.head_dim, 0.1f),
        out(q.size()) {
    const int32_t width = (s.context + s.block_size - 1) / s.block_size;
    tables = testing::random_tables(lengths, s.block_size, width, width, -1, rng);
    p = testing::paged_params(pools, q.data(), out.data(), rows, s.q_heads, tables.data(), width, lengths.data(), 1);
    p.cu_seqlens_q = cu.data();
    p.max_seqlen_q = rows;
  }
  TailRows(const TailRows&) = delete;
  TailRows& operator=(const TailRows&) = delete;
};

// One packed sequence of `context` query rows over its own context (a full causal prefill).
double prefill_gflops(const Shape& s, AttentionBackend& backend, int reps) {
  TailRows call(s, s.context, 2);
  const double secs = bench::best_seconds(reps, [&] { (void)run_attention(backend, call.p); });
  // Causal: query j attends to j + 1 keys; QK and PV cost 2 flops per (key, dim) each.
  const double pairs = 0.5 * s.context * (s.context + 1.0);
  return 4.0 * pairs * s.head_dim * s.q_heads / secs / 1e9;
}

// `rows` query rows at the end of one sequence of `context` tokens (a speculative verification
// of rows - 1 drafts, or a decode row when rows = 1): seconds per call.
double tail_rows_seconds(const Shape& s, int32_t rows, AttentionBackend& backend, int reps) {
  TailRows call(s, rows, 3);
  constexpr int kCalls = 200;  // a call takes microseconds: time many
  return bench::best_seconds(reps, [&] {
           for (int i = 0; i < kCalls; ++i) (void)run_attention(backend, call.p);
         }) /
         kCalls;
}

// Case-insensitive equality: dtypes print as "BF16", flags spell them "bf16".
bool same_name(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](unsigned char x, unsigned char y) {
    return std::tolower(x) == std::tolower(y);
  });
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, short_only = false, decode_only = false, prefill_only = false;
  std::string only_heads, only_dtype;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--short") == 0) short_only = true;
    if (std::strcmp(argv[i], "--decode") == 0) decode_only = true;
    if (std::strcmp(argv[i], "--prefill") == 0) prefill_only = true;
    if (std::strcmp(argv[i], "--heads") == 0 && i + 1 < argc) only_heads = argv[++i];
    if (std::strcmp(argv[i], "--kv-dtype") == 0 && i + 1 < argc) only_dtype = argv[++i];
  }
  const int reps = quick ? 2 : 5;
  auto flash = make_cpu_flash_backend();
  auto reference = make_cpu_reference_backend();
  fmt::print("threads: {}\n", omp_get_max_threads());
  const double copy = bench::copy_bandwidth_gbs();
  fmt::print("copy bandwidth (read+write): {:.1f} GB/s\n\n", copy);
  // The K/V encodings a CPU run may pick (--kv-dtype bf16 | q8_0 | f32), on Ouro-1.4B's heads
  // (16 x 128, one query head per K/V head, 4 KiB bf16 rows per token), Llama-3-8B's (32 x 128
  // over 8, 2 KiB) and SmolLM2-135M's (9 x 64 over 3, 384 bytes): keys per microsecond compares
  // them, the share of copy says how near the memory each one runs.
  fmt::print("{:<44} {:>10} {:>12} {:>10}\n", "decode (cpu_flash, K/V bytes read)", "GB/s",
             "of copy", "keys/us");
  struct DecodeCase {
    const char* heads;
    int32_t q_heads, kv_heads, head_dim, ctx;
  };
  for (const DecodeCase c :
       {DecodeCase{"ouro", 16, 16, 128, 4096}, DecodeCase{"ouro", 16, 16, 128, 8192},
        DecodeCase{"ouro", 16, 16, 128, 16384}, DecodeCase{"llama3-8b", 32, 8, 128, 2048},
        DecodeCase{"smollm2", 9, 3, 64, 512}, DecodeCase{"smollm2", 9, 3, 64, 1024},
        DecodeCase{"smollm2", 9, 3, 64, 4096}}) {
    if (short_only || prefill_only) break;
    if ((quick && c.ctx > 4096) || (!only_heads.empty() && only_heads != c.heads)) continue;
    for (int32_t seqs : {1, 8}) {
      for (const DType dtype : {DType::kBF16, DType::kQ8_0, DType::kF32}) {
        if (!only_dtype.empty() && !same_name(only_dtype, dtype_name(dtype))) continue;
        const Shape s{seqs, c.ctx, c.q_heads, c.kv_heads, c.head_dim, 16, dtype};
        const DecodeResult r = decode_vs_copy(s, *flash, quick ? 3 : 7);
        fmt::print(
            "{:<44} {:>10.1f} {:>11.0f}% {:>10.1f}\n",
            fmt::format("{} {} batch {} context {}", c.heads, dtype_name(dtype), seqs, c.ctx),
            r.gbs, 100.0 * r.ratio, r.keys_per_us);
      }
    }
  }
  if (decode_only) return 0;
  const double sgemm = bench::sgemm_gflops(1024, 1024, 1024, reps);
  fmt::print("\nOpenBLAS sgemm 1024^3: {:.1f} GFLOP/s\n", sgemm);
  fmt::print("{:<44} {:>10} {:>12}\n", "prefill (causal, 16 x 128 heads, bf16 K/V)", "GFLOP/s", "of sgemm");
  for (int32_t n : {512, 1024, 2048}) {
    if (short_only || (quick && n > 512)) break;
    const Shape s{1, n, 16, 16, 128, 16, DType::kBF16};
    const double f = prefill_gflops(s, *flash, reps);
    fmt::print("{:<44} {:>10.1f} {:>11.0f}%\n", fmt::format("cpu_flash prefill {}", n), f, 100.0 * f / sgemm);
    if (n <= 1024) {
      const double r = prefill_gflops(s, *reference, 1);
      fmt::print("{:<44} {:>10.1f} {:>11.0f}%   (flash is {:.1f}x)\n", fmt::format("cpu_reference prefill {}", n), r,
                 100.0 * r / sgemm, f / r);
    }
  }
  // Per K/V encoding, 1,024 tokens: K/V sit in cache, so this is what widening each encoding's
  // vectors costs the arithmetic (Q8_0 widens and scales int8 where bf16 shifts).
  if (!short_only)
    fmt::print("\n{:<44} {:>10} {:>12}\n", "prefill 1024 by K/V encoding (cpu_flash)", "GFLOP/s",
               "of sgemm");
  struct PrefillCase {
    const char* heads;
    int32_t q_heads, kv_heads, head_dim;
  };
  for (const PrefillCase c : {PrefillCase{"ouro", 16, 16, 128}, PrefillCase{"smollm2", 9, 3, 64}}) {
    if (short_only) break;
    if (!only_heads.empty() && only_heads != c.heads) continue;
    for (const DType dtype : {DType::kBF16, DType::kQ8_0, DType::kF32}) {
      if (!only_dtype.empty() && !same_name(only_dtype, dtype_name(dtype))) continue;
      const double f = prefill_gflops(Shape{1, 1024, c.q_heads, c.kv_heads, c.head_dim, 16, dtype},
                                      *flash, reps);
      fmt::print("{:<44} {:>10.1f} {:>11.0f}%\n",
                 fmt::format("{} {} prefill 1024", c.heads, dtype_name(dtype)), f,
                 100.0 * f / sgemm);
    }
  }
  if (prefill_only) return 0;
  // Short contexts, the SmolLM2-135M shape (9 query heads over 3 KV heads of 64): K/V sit in
  // cache and the arithmetic bounds the time, so an extra row costs about what a decode row does.
  fmt::print("\n{:<44} {:>10} {:>9} {:>12}\n", "rows at a context's end (9 x 64, GQA 3, bf16)", "GFLOP/s",
             "of sgemm", "time / 1 row");
  for (int32_t ctx : {256, 400, 640, 1024}) {
    if (quick && ctx > 400) break;
    const Shape s{1, ctx, 9, 3, 64, 16, DType::kBF16};
    double one = 0;
    for (int32_t rows : {1, 2, 3, 4, 5, 8}) {
      const double secs = tail_rows_seconds(s, rows, *flash, reps);
      if (rows == 1) one = secs;
      // Row r of R sees ctx - R + r + 1 keys; QK and PV cost 2 flops per (key, dim) each.
      const double keys = rows * (ctx - rows + 0.5 * (rows + 1.0));
      const double f = 4.0 * keys * s.q_heads * s.head_dim / secs / 1e9;
      fmt::print("{:<44} {:>10.1f} {:>8.0f}% {:>12.2f}\n", fmt::format("cpu_flash context {} rows {}", ctx, rows), f,
                 100.0 * f / sgemm, secs / one);
    }
  }
  return 0;
}
