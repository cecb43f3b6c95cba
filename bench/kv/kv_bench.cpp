// KV cache manager throughput at 100k pages (Google Benchmark). Shapes follow Ouro-1.4B serving:
// block 16, 4 loop depths under last_exited, 1024-token prompts with 128 new tokens
// (capacity 1151 tokens = 72 pages = 288 blocks). Results: docs/kv-cache.md "Benchmarks".
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace rlt::kv {
namespace {

constexpr int32_t kBlocks = 100'000;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kDepth = 4;
constexpr int32_t kPrompt = 1024;
constexpr int32_t kCapacity = kPrompt + 128 - 1;

KVCacheManager make_manager(bool prefix, KVLayout layout = KVLayout::kLastExited) {
  KVCacheConfig c;
  c.geometry = KVGeometry{.num_blocks = kBlocks,
                          .num_layers = 24,
                          .block_size = kBlockSize,
                          .num_kv_heads = 16,
                          .head_dim = 128,
                          .dtype = DType::kBF16};
  c.depth = kDepth;
  c.layout = layout;
  c.enable_prefix_caching = prefix;
  c.model_salt = "bench";
  auto m = KVCacheManager::create(c);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().to_string().c_str());
    std::abort();
  }
  return std::move(m).value();
}

void must(const Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    std::abort();
  }
}

// A prompt unique to `seed` from its first token on.
std::vector<TokenId> prompt_for(int32_t seed) {
  std::vector<TokenId> p(kPrompt);
  std::iota(p.begin(), p.end(), seed * 7919);
  return p;
}

AllocateRequest request(RequestId id, std::span<const TokenId> prompt = {}, int32_t initial = 0) {
  AllocateRequest r;
  r.id = id;
  r.capacity_tokens = kCapacity;
  r.initial_tokens = initial;
  r.prompt = prompt;
  return r;
}

// Keeps `fraction` of the pool held by long-lived requests, so timings reflect a busy pool.
RequestId occupy(KVCacheManager& m, double fraction) {
  RequestId id = 1'000'000;
  while (m.num_used_blocks() + 288 <= fraction * kBlocks) must(m.allocate(request(id++)).status());
  return id;
}

// allocate + free of one full-capacity request (288 blocks) on an otherwise idle / half-full pool.
void BM_AllocateFree(benchmark::State& state) {
  KVCacheManager m = make_manager(false);
  occupy(m, state.range(0) / 100.0);
  for (auto _ : state) {
    auto adm = m.allocate(request(1));
    benchmark::DoNotOptimize(adm);
    m.free(1);
  }
  state.counters["blocks/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 288,
                                                  benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocateFree)->Arg(0)->Arg(50)->ArgName("busy%");

// Fill the whole pool with 347 requests, then free them all (batch admission / drain).
void BM_FillAndDrainPool(benchmark::State& state) {
  KVCacheManager m = make_manager(false);
  const int32_t n = kBlocks / 288;
  for (auto _ : state) {
    for (int32_t i = 0; i < n; ++i) must(m.allocate(request(static_cast<RequestId>(i))).status());
    for (int32_t i = 0; i < n; ++i) m.free(static_cast<RequestId>(i));
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["blocks/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * n * 288,
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FillAndDrainPool)->Unit(benchmark::kMillisecond);

// Incremental allocation: admit with one page, then grow page by page to 72 pages (decode).
void BM_GrowByPage(benchmark::State& state) {
  KVCacheManager m = make_manager(false);
  occupy(m, 0.5);
  for (auto _ : state) {
    must(m.allocate(request(1, {}, kBlockSize)).status());
    for (int32_t tokens = 2 * kBlockSize; tokens < kCapacity + kBlockSize; tokens += kBlockSize) {
      must(m.ensure_capacity(1, std::min(tokens, kCapacity)));
    }
    m.free(1);
  }
  state.SetItemsProcessed(state.iterations() * 71);  // growth calls
}
BENCHMARK(BM_GrowByPage);

// Prefix lookup of a 1024-token prompt whose 63 cacheable pages are all cached, with the pool
// holding ~390 cached prompts (hashing + index probes + token verification per page).
void BM_LookupHit(benchmark::State& state) {
  KVCacheManager m = make_manager(true);
  int32_t cached = 0;
  for (;; ++cached) {
    std::vector<TokenId> p = prompt_for(cached);
    auto adm = m.allocate(request(static_cast<RequestId>(cached), p));
    if (!adm.ok()) break;
    must(m.record_written_all_depths(static_cast<RequestId>(cached), 0, kPrompt));
    m.free(static_cast<RequestId>(cached));
    if (m.num_free_blocks() < 288) break;
  }
  std::vector<TokenId> probe = prompt_for(cached / 2);
  for (auto _ : state) {
    PrefixMatch match = m.lookup_prefix(probe);
    benchmark::DoNotOptimize(match);
  }
  state.counters["pages/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 63, benchmark::Counter::kIsRate);
  state.counters["cached_prompts"] = cached;
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LookupHit);

// A miss on the first page: the cheapest lookup (one hash, one probe).
void BM_LookupMiss(benchmark::State& state) {
  KVCacheManager m = make_manager(true);
  std::vector<TokenId> probe = prompt_for(1);
  for (auto _ : state) {
    PrefixMatch match = m.lookup_prefix(probe);
    benchmark::DoNotOptimize(match);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LookupMiss);

// allocate with a 63-page hit + free: admission of a request whose prompt is fully cached.
void BM_AllocateWithPrefixHit(benchmark::State& state) {
  KVCacheManager m = make_manager(true);
  std::vector<TokenId> p = prompt_for(3);
  must(m.allocate(request(1, p)).status());
  must(m.record_written_all_depths(1, 0, kPrompt));
  m.free(1);
  for (auto _ : state) {
    auto adm = m.allocate(request(2, p));
    benchmark::DoNotOptimize(adm);
    m.free(2);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocateWithPrefixHit);

// Steady-state churn with a full cache: each request has a new prompt, so admission must evict
// 72 cached pages (leaf first), then prefill publishes 63 and free releases them to the cache.
void BM_ChurnWithEviction(benchmark::State& state) {
  KVCacheManager m = make_manager(true);
  int32_t seed = 0;
  auto cycle = [&] {
    std::vector<TokenId> p = prompt_for(seed++);
    must(m.allocate(request(1, p)).status());
    must(m.record_written_all_depths(1, 0, kPrompt));
    m.free(1);
  };
  while (m.num_free_blocks() >= 288) cycle();  // warm: the pool is now mostly cache
  const uint64_t evicted_before = m.prefix_stats().evicted_entries;
  for (auto _ : state) cycle();
  state.counters["evicted/iter"] =
      static_cast<double>(m.prefix_stats().evicted_entries - evicted_before) /
      static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ChurnWithEviction);

// The full invariant check on a busy 100k-page pool (debug-build cost).
void BM_CheckInvariants(benchmark::State& state) {
  KVCacheManager m = make_manager(true);
  occupy(m, 0.9);
  for (auto _ : state) must(m.check_invariants());
}
BENCHMARK(BM_CheckInvariants)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rlt::kv
