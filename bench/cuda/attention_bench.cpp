// Decode attention on the GPU (cuda_paged, then cudnn where it loads): K/V read bandwidth at
// Ouro-1.4B's attention shape (16 query and KV heads, head_dim 128, bf16, 16-token pages,
// fragmented page tables) and a GQA shape, against the same run's device copy bandwidth; and packed
// causal prefill as TFLOP/s against the same run's cuBLAS bf16 matmul rate.
// bench/peer/torch_sdpa_decode.py measures PyTorch's SDPA on the same shapes;
// scripts/device_check.sh states the ratio. Each timed pass walks enough distinct K/V (>= 512 MiB)
// that L2 serves none of it. Usage: rlt_bench_cuda_attention [--json]
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "attention/registry.h"
#include "cuda_bench_util.h"

namespace {

using rlt::bench_cuda::best_ms;
using rlt::bench_cuda::check;

struct Case {
  int32_t batch, context, q_heads, kv_heads, head_dim;
  bool prefill = false;  // every position of each sequence as one packed sequence (causal)
};

struct Measured {
  double gbs = 0, us_per_call = 0, tflops = 0;
  bool ok = false;
};

Measured measure(const Case& c, rlt::attention::AttentionBackend& backend) {
  using namespace rlt;
  const int32_t block_size = 16;
  const int64_t blocks_per_seq = (c.context + block_size - 1) / block_size;
  const int64_t call_bytes =
      int64_t{c.batch} * c.context * c.kv_heads * c.head_dim * 2 * 2;  // K + V, bf16
  // Decode: distinct K/V per pass so that L2 serves none of it. Prefill is compute-bound: one set.
  const int64_t sets = c.prefill ? 1 : std::max<int64_t>(1, (int64_t{512} << 20) / call_bytes);
  const int64_t rows = c.prefill ? int64_t{c.batch} * c.context : c.batch;
  const int64_t num_blocks = sets * c.batch * blocks_per_seq;
  const int64_t block_elems = int64_t{block_size} * c.kv_heads * c.head_dim;
  Measured m;
  void *k = nullptr, *v = nullptr, *q = nullptr, *out = nullptr, *tables = nullptr,
       *lengths = nullptr, *cu = nullptr;
  const size_t pool_bytes = static_cast<size_t>(num_blocks * block_elems) * 2;
  const size_t qo_bytes = static_cast<size_t>(rows) * c.q_heads * c.head_dim * sizeof(float);
  if (!check(cudaMalloc(&k, pool_bytes), "K pool") ||
      !check(cudaMalloc(&v, pool_bytes), "V pool") || !check(cudaMalloc(&q, qo_bytes), "q") ||
      !check(cudaMalloc(&out, qo_bytes), "out"))
    return m;
  cudaMemset(k, 0x3c, pool_bytes);  // bf16 0x3c3c ~ 0.0115: finite, equal scores
  cudaMemset(v, 0x3c, pool_bytes);
  cudaMemset(q, 0, qo_bytes);
  // Every sequence of every set gets its own shuffled blocks: fragmented like a busy cache.
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
  std::vector<int32_t> host_lengths(static_cast<size_t>(c.batch), c.context);
  const size_t table_bytes = ids.size() * sizeof(int32_t);
  if (!check(cudaMalloc(&tables, table_bytes), "tables") ||
      !check(cudaMalloc(&lengths, c.batch * sizeof(int32_t)), "lengths"))
    return m;
  cudaMemcpy(tables, ids.data(), table_bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(lengths, host_lengths.data(), c.batch * sizeof(int32_t), cudaMemcpyHostToDevice);
  std::vector<int32_t> host_cu(static_cast<size_t>(c.batch) + 1);
  for (int32_t s = 0; s <= c.batch; ++s) host_cu[static_cast<size_t>(s)] = s * c.context;
  if (!check(cudaMalloc(&cu, host_cu.size() * sizeof(int32_t)), "cu_seqlens")) return m;
  cudaMemcpy(cu, host_cu.data(), host_cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice);

  attention::AttentionParams p;
  p.q = static_cast<const float*>(q);
  p.out = static_cast<float*>(out);
  p.rows = rows;
  p.num_seqs = c.batch;
  if (c.prefill) {
    p.cu_seqlens_q = static_cast<const int32_t*>(cu);
    p.host_cu_seqlens_q = host_cu.data();
    p.max_seqlen_q = c.context;
  }
  p.num_q_heads = c.q_heads;
  for (auto* view : {&p.k, &p.v}) {
    view->block_stride = block_elems;
    view->token_stride = int64_t{c.kv_heads} * c.head_dim;
    view->head_stride = c.head_dim;
    view->num_blocks = static_cast<int32_t>(num_blocks);
    view->block_size = block_size;
    view->num_kv_heads = c.kv_heads;
    view->head_dim = c.head_dim;
    view->dtype = DType::kBF16;
  }
  p.k.base = k;
  p.v.base = v;
  p.table_width = static_cast<int32_t>(blocks_per_seq);
  p.context_lengths = static_cast<const int32_t*>(lengths);
  p.host_context_lengths = host_lengths.data();
  // Validate every set once through the public entry; time the launches alone (validation is
  // the planner's host work, overlapped with the previous step in the runner).
  for (int64_t s = 0; s < sets; ++s) {
    p.block_tables = static_cast<const int32_t*>(tables) + s * c.batch * blocks_per_seq;
    p.host_block_tables = ids.data() + s * c.batch * blocks_per_seq;
    const Status st = attention::run_attention(backend, p);
    if (!st.ok()) {
      fmt::print(stderr, "{}\n", st.to_string());
      return m;
    }
  }
  const float ms = best_ms(c.prefill ? 3 : 7, [&] {
    for (int64_t s = 0; s < sets; ++s) {
      p.block_tables = static_cast<const int32_t*>(tables) + s * c.batch * blocks_per_seq;
      (void)backend.run(p);
    }
  });
  m.ok = check(cudaDeviceSynchronize(), "attention");
  m.gbs = static_cast<double>(sets * call_bytes) / (ms * 1e-3) / 1e9;
  m.us_per_call = ms * 1e3 / static_cast<double>(sets);
  // Causal: row j sees j + 1 keys; 2 FLOPs per key and dim for Q·K, 2 for P·V, per query head.
  const double pairs =
      c.prefill ? 0.5 * c.context * (c.context + 1.0) : static_cast<double>(c.context);
  m.tflops = 4.0 * pairs * c.batch * c.q_heads * c.head_dim / (m.us_per_call * 1e-6) / 1e12;
  for (void* ptr : {k, v, q, out, tables, lengths, cu}) cudaFree(ptr);
  return m;
}

// The run's bf16 matmul rate (cuBLAS, bf16 in and out, f32 accumulation), best of 10 after 3
// warm-ups (the clocks idle low until work arrives). Random operands: constant ones toggle fewer
// bits and run faster (894 against 788 TFLOP/s on an H200 for zeros against random data).
double matmul_tflops() {
  const int n = 8192;
  void *a = nullptr, *c = nullptr;
  const size_t bytes = size_t{2} * n * n;
  if (!check(cudaMalloc(&a, bytes), "matmul A") || !check(cudaMalloc(&c, bytes), "matmul C"))
    return 0;
  {
    // bf16 values of random sign and mantissa with exponents around 1.0 (|x| in [1/4, 4)).
    std::vector<uint16_t> host(static_cast<size_t>(n) * n);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    for (uint16_t& x : host) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const auto bits = static_cast<uint32_t>(state);
      x = static_cast<uint16_t>(((bits >> 31) << 15) | ((125u + (bits >> 8) % 4u) << 7) |
                                (bits & 0x7fu));
    }
    if (!check(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice), "matmul A upload"))
      return 0;
  }
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 0;
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&] {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, a, CUDA_R_16BF, n,
                 &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  for (int i = 0; i < 3; ++i) gemm();
  const float ms = best_ms(10, gemm);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(c);
  return 2.0 * n * double(n) * n / (ms * 1e-3) / 1e12;
}

// The decode and prefill tables of one backend; returns the number of cases that failed.
int run_backend(const std::string& name, bool json, double copy_gbs, double matmul) {
  const auto* entry = rlt::attention::find_backend(name);
  if (entry == nullptr || !entry->built) {
    fmt::print("\n{}: not in this build\n", name);
    return 0;
  }
  if (entry->library_check) {
    const rlt::Status usable = entry->library_check();
    if (!usable.ok()) {
      fmt::print("\n{}: skipped: {}\n", name, usable.message());
      return 0;
    }
  }
  auto backend = entry->create();
  fmt::print("\n{:<34} {:>10} {:>9} {:>9}\n", fmt::format("decode attention ({}, bf16)", name),
             "us/call", "GB/s", "of copy");
  const Case cases[] = {{1, 1024, 16, 16, 128},  {32, 1024, 16, 16, 128},  {128, 1024, 16, 16, 128},
                        {32, 4096, 16, 16, 128}, {128, 4096, 16, 16, 128}, {32, 4096, 32, 8, 128}};
  int failures = 0;
  for (const Case& c : cases) {
    const Measured m = measure(c, *backend);
    if (!m.ok) {
      ++failures;
      continue;
    }
    const std::string label = fmt::format("b{} ctx{} heads {}/{} d{}", c.batch, c.context,
                                          c.q_heads, c.kv_heads, c.head_dim);
    fmt::print("{:<34} {:>10.1f} {:>9.0f} {:>8.0f}%\n", label, m.us_per_call, m.gbs,
               100.0 * m.gbs / copy_gbs);
    if (json) {
      fmt::print(
          "JSON {{\"bench\": \"attention_decode\", \"backend\": \"{}\", \"batch\": {}, "
          "\"context\": {}, "
          "\"q_heads\": {}, \"kv_heads\": {}, \"head_dim\": {}, \"gbps\": {:.1f}, \"copy_gbps\": "
          "{:.1f}}}\n",
          name, c.batch, c.context, c.q_heads, c.kv_heads, c.head_dim, m.gbs, copy_gbs);
    }
  }
  fmt::print("{:<34} {:>10} {:>9} {:>9}\n", fmt::format("packed prefill ({}, bf16)", name),
             "ms/call", "TFLOP/s", "of matmul");
  const Case prefill_cases[] = {
      {1, 1024, 16, 16, 128, true}, {4, 4096, 16, 16, 128, true}, {1, 4096, 32, 8, 128, true}};
  for (const Case& c : prefill_cases) {
    const Measured m = measure(c, *backend);
    if (!m.ok) {
      ++failures;
      continue;
    }
    const std::string label =
        fmt::format("{}x{} heads {}/{} d{}", c.batch, c.context, c.q_heads, c.kv_heads, c.head_dim);
    fmt::print("{:<34} {:>10.2f} {:>9.1f} {:>8.1f}%\n", label, m.us_per_call / 1e3, m.tflops,
               100.0 * m.tflops / matmul);
    if (json) {
      fmt::print(
          "JSON {{\"bench\": \"attention_prefill\", \"backend\": \"{}\", \"batch\": {}, "
          "\"context\": {}, "
          "\"q_heads\": {}, \"kv_heads\": {}, \"head_dim\": {}, \"tflops\": {:.2f}, "
          "\"matmul_tflops\": {:.1f}}}\n",
          name, c.batch, c.context, c.q_heads, c.kv_heads, c.head_dim, m.tflops, matmul);
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  const bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  if (!rlt::bench_cuda::print_device()) return 0;
  const double copy_gbs = rlt::cuda::copy_bandwidth_gbs(size_t{1} << 30);
  fmt::print("copy bandwidth (read + write): {:.0f} GB/s\n", copy_gbs);
  const double matmul = matmul_tflops();
  fmt::print("bf16 matmul (cuBLAS, 8192^3, bf16 out): {:.0f} TFLOP/s\n", matmul);
  int failures = 0;
  for (const char* name : {"cuda_paged", "cudnn"})
    failures += run_backend(name, json, copy_gbs, matmul);
  return failures == 0 ? 0 : 1;
}
