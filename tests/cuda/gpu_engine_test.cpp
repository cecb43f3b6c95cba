// The GPU engine against the CPU engine: on an f32 copy of the demo model (f32 weights, f32 K/V),
// greedy decoding gives the same tokens and exit depths. Both compute in f32; they differ in
// summation order (cuBLAS, tree reductions) by a few ulps, far below the demo model's logit
// margins.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>

#include "attention/registry.h"
#include "common/log.h"
#include "cuda/model_kernels.h"
#include "gpu_test_util.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "kernels/cpu/weight_matrix.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"
#include "runner/device_choice.h"

namespace rlt {
namespace {

std::filesystem::path test_dir() {
  return std::filesystem::temp_directory_path() /
         ("rlt_gpu_engine_test_" + std::to_string(::getpid()));
}

// The demo checkpoint as shipped (bf16 weights) under test_dir().
std::string bf16_demo_dir() {
  const auto dir = test_dir() / "bf16";
  if (!model::write_demo_checkpoint(dir.string()).ok())
    throw std::runtime_error("cannot write the demo");
  return dir.string();
}

// The demo checkpoint with every tensor widened to f32 (config and tokenizer copied as they are).
std::string f32_demo_dir() {
  namespace fs = std::filesystem;
  const fs::path bf16 = bf16_demo_dir(), f32 = test_dir() / "f32";
  fs::create_directories(f32);
  for (const auto& e : fs::directory_iterator(bf16)) {
    if (e.path().filename() != "model.safetensors")
      fs::copy_file(e.path(), f32 / e.path().filename(), fs::copy_options::overwrite_existing);
  }
  auto ckpt = io::Checkpoint::open_dir(bf16.string());
  if (!ckpt.ok()) throw std::runtime_error(ckpt.status().to_string());
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, view] : ckpt->tensors()) {
    io::TensorToWrite t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = view.shape;
    std::vector<float> values(static_cast<size_t>(view.numel()));
    kernels::WeightMatrix{view.dtype, 1, view.numel(), view.data}.row_to_f32(0, values.data());
    t.bytes.resize(values.size() * sizeof(float));
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  if (!io::write_safetensors((f32 / "model.safetensors").string(), std::move(tensors)).ok())
    throw std::runtime_error("cannot write the f32 demo");
  return f32.string();
}

struct Generation {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int32_t>> depths;
  std::vector<std::vector<TokenLogprobs>> logprobs;
  int64_t graph_replays = 0;
  int64_t lookahead_batches = 0;
  int64_t device_sampled_batches = 0;
  int64_t preemptions = 0;
  DeviceStageTimes device_time;
};

// One generation's settings.
struct RunSettings {
  std::string device = "cuda", layout = "last_exited", graphs = "auto", kv_dtype = "f32";
  std::string exit_policy = "ouro";
  bool logprobs = false, async = false, pdl = false, device_sampling = true, penalties = false;
  bool preallocate = true;  // false: the runner's buffers grow as batches need them
  // A pool of this many blocks of `block_size` tokens with preemption on (0: 1 GiB, none).
  int64_t preempting_pool_blocks = 0;
  int32_t block_size = 16;
  double temperature = 0.0;
  std::string attention = "auto";
  std::vector<std::vector<int32_t>> prompts = {
      {5, 9, 13},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {42},
      {100, 7, 100, 7, 100, 7, 100, 7}};
  int32_t max_num_seqs = 4;
  // Prompts from index `first_wave` on arrive after `arrival_step` engine steps.
  size_t first_wave = SIZE_MAX;
  int arrival_step = 0;
};

// Two requests: recurrent batches of 1 and 2 rows, both graph buckets already (no padded rows), so
// runs with and without CUDA graphs multiply the same matrix shapes. (cuBLAS may pick another
// kernel, with another summation order, for 3 rows than for the 4 of their bucket.)
const std::vector<std::vector<int32_t>> kTwoPrompts = {
    {5, 9, 13}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}};

Generation generate(const std::string& dir, const RunSettings& run_settings) {
  const RunSettings& s = run_settings;
  EngineConfig c;
  c.programmatic_launch = s.pdl;
  c.device_sampling = s.device_sampling;
  c.gpu_preallocate = s.preallocate;
  c.exit_policy = *parse_exit_policy(s.exit_policy);
  c.async_scheduling = s.async;
  c.model = dir;
  c.device = s.device;
  c.cuda_graphs = *parse_cuda_graphs(s.graphs);
  c.kv_dtype = *parse_kv_dtype(s.kv_dtype);
  c.kv_layout = *parse_kv_layout(s.layout);
  c.attention_backend = s.attention;
  c.max_num_seqs = s.max_num_seqs;
  // The CPU's budgets on both devices, so both batch alike.
  c.kv_cache_bytes = int64_t{1} << 30;
  c.block_size = s.block_size;
  if (s.preempting_pool_blocks > 0) {
    c.num_kv_blocks = s.preempting_pool_blocks;
    c.enable_preemption = true;
    c.watermark = 0.0;
  }
  c.max_num_batched_tokens = 128;
  c.prefill_chunk_size = 7;  // several chunks per prompt
  auto engine = Engine::create(c);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  Generation run;
  if (!engine.ok()) return run;
  const std::vector<std::vector<int32_t>>& prompts = s.prompts;
  SamplingParams p;
  p.max_tokens = 12;
  p.temperature = s.temperature;
  p.top_p = s.temperature > 0 ? 0.9 : 1.0;
  p.top_k = s.temperature > 0 ? 50 : -1;
  p.ignore_eos = true;
  // Early exit on: the exit gate decides depths, and rows leave recurrent batches at different
  // loops, so batches of 1..4 rows (padded buckets included) all occur.
  p.exit_threshold = 0.5;
  p.min_loops = 1;
  if (s.logprobs) p.logprobs = 3;
  if (s.penalties) {
    p.repetition_penalty = 1.2;
    p.frequency_penalty = 0.4;
    p.presence_penalty = 0.2;
  }
  auto add = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < std::min(end, prompts.size()); ++i)
      EXPECT_TRUE((*engine)->add_request(10 + i, prompts[i], p).ok());
  };
  add(0, s.first_wave);
  run.tokens.resize(prompts.size());
  run.depths.resize(prompts.size());
  run.logprobs.resize(prompts.size());
  size_t finished = 0;
  std::map<uint64_t, RequestResult> gathered;  // from the engine's delta outputs
  for (int step = 0; step < 10000 && finished < prompts.size(); ++step) {
    if (step == s.arrival_step && s.first_wave < prompts.size()) add(s.first_wave, SIZE_MAX);
    auto outputs = (*engine)->step();
    EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
    if (!outputs.ok()) break;
    for (const auto& delta : *outputs) {
      RequestResult& o = gathered[delta.request_id];
      o.append(delta);
      if (!o.finished) continue;
      run.tokens[o.request_id - 10] = o.token_ids;
      run.depths[o.request_id - 10] = o.exit_depths;
      run.logprobs[o.request_id - 10] = o.logprobs;
      ++finished;
    }
  }
  EXPECT_EQ(finished, prompts.size());
  run.graph_replays = (*engine)->metrics().cuda_graph_replays;
  run.lookahead_batches = (*engine)->metrics().lookahead_batches;
  run.device_sampled_batches = (*engine)->metrics().device_sampled_batches;
  run.preemptions = (*engine)->metrics().preemptions;
  run.device_time = (*engine)->metrics().device_time;
  return run;
}

TEST(GpuEngine, GreedyTokensEqualTheCpuEngineInF32) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = f32_demo_dir();
  for (const char* layout : {"last_exited", "shared"}) {
    const Generation cpu = generate(dir, {.device = "cpu", .layout = layout});
    for (const char* graphs : {"on", "off"}) {
      const Generation gpu = generate(dir, {.layout = layout, .graphs = graphs});
      EXPECT_EQ(gpu.tokens, cpu.tokens) << layout << " graphs " << graphs;
      EXPECT_EQ(gpu.depths, cpu.depths) << layout << " graphs " << graphs;
      // Every stage's batches are timed on the device.
      for (const DeviceStageTime& t : {gpu.device_time.prefill, gpu.device_time.prelude,
                                       gpu.device_time.recurrent, gpu.device_time.coda}) {
        EXPECT_GT(t.batches, 0);
        EXPECT_GT(t.milliseconds, 0.0);
      }
      EXPECT_EQ(cpu.device_time.recurrent.batches, 0);
      if (std::string(graphs) == "on") {
        EXPECT_GT(gpu.graph_replays, 0) << "recurrent batches replay captured graphs";
      } else {
        EXPECT_EQ(gpu.graph_replays, 0);
      }
    }
  }
}

// A pool too small for every request at once: growing requests preempt others, whose K/V go to
// host memory through the device storage's snapshots and come back on resume. Scheduling is the
// same on both devices (same pool, same budgets), so tokens and depths equal the CPU engine's.
TEST(GpuEngine, PreemptionThroughHostSnapshotsMatchesTheCpuEngine) {
  set_log_level(LogLevel::kWarn);
  struct RemoveTestDir {  // also when the GPU half is skipped
    ~RemoveTestDir() { std::filesystem::remove_all(test_dir()); }
  } remove_test_dir;
  const std::string dir = f32_demo_dir();
  // 4-token pages: the four requests need 21 pages per plane and the longest (17 + 12 tokens) 8;
  // `last_exited` keeps up to four planes, `shared` one.
  const std::vector<std::pair<std::string, int64_t>> pools = {{"last_exited", 40}, {"shared", 12}};
  std::vector<Generation> cpu;
  for (const auto& [layout, blocks] : pools) {  // the CPU half runs without a device too
    cpu.push_back(generate(
        dir,
        {.device = "cpu", .layout = layout, .preempting_pool_blocks = blocks, .block_size = 4}));
    EXPECT_GT(cpu.back().preemptions, 0) << layout << ": the pool is small enough to preempt";
  }
  RLT_REQUIRE_CUDA_DEVICE();
  for (size_t i = 0; i < pools.size(); ++i) {
    const auto& [layout, blocks] = pools[i];
    const Generation gpu =
        generate(dir, {.layout = layout, .preempting_pool_blocks = blocks, .block_size = 4});
    EXPECT_EQ(gpu.preemptions, cpu[i].preemptions) << layout;
    EXPECT_EQ(gpu.tokens, cpu[i].tokens) << layout;
    EXPECT_EQ(gpu.depths, cpu[i].depths) << layout;
  }
}

// Requests arriving once graphs exist grow the runner's row and state buffers, which drops the
// captured graphs (they point at the old buffers) and captures again: one request decodes alone
// (bucket 1 captured), then twenty more arrive with prompts of 1..20 tokens (more prefill rows
// and request states than the runner holds). Tokens and depths still equal the CPU engine's.
TEST(GpuEngine, GraphsAreRecapturedWhenBuffersGrow) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = f32_demo_dir();
  RunSettings run{
      .graphs = "on", .preallocate = false, .max_num_seqs = 32, .first_wave = 1, .arrival_step = 4};
  run.prompts = {{1}};
  for (int32_t n = 1; n <= 20; ++n) {
    std::vector<int32_t> prompt;
    for (int32_t j = 0; j < n; ++j) prompt.push_back((n * 7 + j * 13) % 200 + 1);
    run.prompts.push_back(prompt);
  }
  RunSettings cpu_run = run;
  cpu_run.device = "cpu";
  cpu_run.graphs = "auto";
  const Generation cpu = generate(dir, cpu_run);
  const Generation gpu = generate(dir, run);
  EXPECT_EQ(gpu.tokens, cpu.tokens);
  EXPECT_EQ(gpu.depths, cpu.depths);
  EXPECT_GT(gpu.graph_replays, 0);
  std::filesystem::remove_all(test_dir());
}

// bf16 weights and K/V (the demo as shipped): replaying graphs computes exactly what eager
// execution computes, with early exit deciding depths.
TEST(GpuEngine, Bf16GraphsReplayEagerResultsExactly) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  const Generation eager =
      generate(dir, {.graphs = "off", .kv_dtype = "bf16", .prompts = kTwoPrompts});
  const Generation graphs =
      generate(dir, {.graphs = "on", .kv_dtype = "bf16", .prompts = kTwoPrompts});
  EXPECT_EQ(graphs.tokens, eager.tokens);
  EXPECT_EQ(graphs.depths, eager.depths);
  EXPECT_GT(graphs.graph_replays, 0);
  std::filesystem::remove_all(test_dir());
}

// One request of a one-token prompt runs one row at a time, so every bf16 projection takes rlt's
// GEMV on f32 activations (the gate/up one with the SwiGLU fused in), which is how the CPU engine
// computes with bf16 weights. With f32 K/V both then compute in f32 from the same weights and
// differ only in summation order (each dot product within k·2⁻²⁴ of its magnitude, k ≤ 5632, and
// typically √k times less), so the greedy tokens and exit depths agree and every logprob agrees
// within 1e-3, a margin for that error's growth through the layers and loops that is still two
// orders below the smallest gap between the top two logprobs on this prompt (0.128, CPU engine).
// Its exit depths vary (1–4 loops), so the exit gate's decisions are compared too.
TEST(GpuEngine, Bf16SingleRowDecodeMatchesTheCpuEngine) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  RunSettings run{.logprobs = true, .prompts = {{1}}};  // f32 K/V
  RunSettings cpu_run = run;
  cpu_run.device = "cpu";
  const Generation cpu = generate(dir, cpu_run);
  ASSERT_EQ(cpu.tokens.size(), 1u);
  ASSERT_FALSE(cpu.tokens[0].empty());
  for (const char* graphs : {"on", "off"}) {
    run.graphs = graphs;
    const Generation gpu = generate(dir, run);
    EXPECT_EQ(gpu.tokens, cpu.tokens) << "graphs " << graphs;
    EXPECT_EQ(gpu.depths, cpu.depths) << "graphs " << graphs;
    ASSERT_EQ(gpu.logprobs[0].size(), cpu.logprobs[0].size());
    for (size_t t = 0; t < cpu.logprobs[0].size(); ++t) {
      const TokenLogprobs &g = gpu.logprobs[0][t], &c = cpu.logprobs[0][t];
      EXPECT_NEAR(g.logprob, c.logprob, 1e-3) << "graphs " << graphs << " token " << t;
      ASSERT_EQ(g.top.size(), c.top.size());
      ASSERT_FALSE(g.top.empty());
      // Alternatives closer than the tolerance may trade places or cross the top-k boundary.
      for (const auto& want : c.top) {
        const auto found = std::find_if(g.top.begin(), g.top.end(),
                                        [&](const auto& e) { return e.token == want.token; });
        const float got = found != g.top.end() ? found->logprob : g.top.back().logprob;
        EXPECT_NEAR(got, want.logprob, 1e-3)
            << "graphs " << graphs << " token " << t << " alternative " << want.token;
      }
    }
  }
  std::filesystem::remove_all(test_dir());
}

// Logprobs from the device against the host sampler's on the same logits: the same tokens, the
// f32 values within one ulp (their double normalizers associate differently).
void expect_same_logprobs(const Generation& device, const Generation& host,
                          const std::string& what) {
  ASSERT_EQ(device.logprobs.size(), host.logprobs.size());
  for (size_t r = 0; r < host.logprobs.size(); ++r) {
    ASSERT_EQ(device.logprobs[r].size(), host.logprobs[r].size()) << what << " request " << r;
    for (size_t t = 0; t < host.logprobs[r].size(); ++t) {
      const TokenLogprobs &d = device.logprobs[r][t], &h = host.logprobs[r][t];
      EXPECT_EQ(d.token, h.token) << what;
      EXPECT_NEAR(d.logprob, h.logprob, std::max(1.0f, std::fabs(h.logprob)) * 1.2e-7f) << what;
      ASSERT_EQ(d.top.size(), h.top.size()) << what;
      for (size_t j = 0; j < h.top.size(); ++j) {
        EXPECT_EQ(d.top[j].token, h.top[j].token) << what << " top " << j;
        EXPECT_NEAR(d.top[j].logprob, h.top[j].logprob,
                    std::max(1.0f, std::fabs(h.top[j].logprob)) * 1.2e-7f)
            << what << " top " << j;
      }
    }
  }
}

// Sampling on the device follows the host sampler's rules at the same uniforms, so the tokens
// agree with --host-sampling on the same GPU logits: greedy, and temperature 0.8 with top-k 50 and
// top-p 0.9; with and without penalties and logprobs (synchronous and asynchronous scheduling).
TEST(GpuEngine, DeviceSamplingEqualsTheHostSampler) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  for (double temperature : {0.0, 0.8}) {
    for (bool extras : {false, true}) {
      RunSettings run{
          .kv_dtype = "bf16", .exit_policy = "ouro_delayed", .temperature = temperature};
      run.logprobs = run.penalties = extras;
      const Generation device = generate(dir, run);
      RunSettings host_run = run;
      host_run.device_sampling = false;
      const Generation host = generate(dir, host_run);
      RunSettings async_run = run;
      async_run.async = true;
      const Generation async = generate(dir, async_run);
      const std::string what =
          fmt::format("temperature {} penalties and logprobs {}", temperature, extras);
      EXPECT_GT(device.device_sampled_batches, 0) << what;  // the device path did run
      EXPECT_GT(async.device_sampled_batches, 0) << what;
      EXPECT_EQ(host.device_sampled_batches, 0) << what;
      EXPECT_EQ(device.tokens, host.tokens) << what;
      EXPECT_EQ(device.depths, host.depths) << what;
      EXPECT_EQ(async.tokens, host.tokens) << what;
      if (extras) {
        expect_same_logprobs(device, host, what);
        expect_same_logprobs(async, host, what + " async");
        EXPECT_FALSE(host.logprobs[0].empty());
      }
    }
  }
}

// Asynchronous scheduling (batch N + 1 enqueued before batch N's results are read; results from
// pinned slots, plans through the staging ring, finalize copies queued on the stream) computes
// what synchronous stepping computes: f32 against the CPU engine, bf16 against the GPU's own
// synchronous run, with device and host sampling.
TEST(GpuEngine, AsyncSchedulingEqualsSynchronousStepping) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string f32 = f32_demo_dir();
  for (const char* layout : {"last_exited", "shared"}) {
    const Generation cpu =
        generate(f32, {.device = "cpu", .layout = layout, .exit_policy = "ouro_delayed"});
    for (const char* graphs : {"on", "off"}) {
      const Generation gpu = generate(
          f32, {.layout = layout, .graphs = graphs, .exit_policy = "ouro_delayed", .async = true});
      EXPECT_EQ(gpu.tokens, cpu.tokens) << layout << " graphs " << graphs;
      EXPECT_EQ(gpu.depths, cpu.depths) << layout << " graphs " << graphs;
      EXPECT_GT(gpu.lookahead_batches, 0);
    }
  }
  const std::string bf16 = bf16_demo_dir();
  for (bool device_sampling : {true, false}) {
    RunSettings run{.graphs = "on", .kv_dtype = "bf16", .exit_policy = "ouro_delayed"};
    run.device_sampling = device_sampling;
    const Generation sync = generate(bf16, run);
    run.async = true;
    const Generation async = generate(bf16, run);
    EXPECT_EQ(async.tokens, sync.tokens) << "device sampling " << device_sampling;
    EXPECT_EQ(async.depths, sync.depths) << "device sampling " << device_sampling;
    EXPECT_EQ(sync.lookahead_batches, 0);
    EXPECT_GT(async.lookahead_batches, 0);
  }
}

// Programmatic dependent launch changes when kernels start, never what they compute: the same
// tokens and depths, bit for bit, with graphs and eagerly, synchronous and asynchronous.
TEST(GpuEngine, ProgrammaticLaunchComputesTheSameTokens) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  const cuda::DeviceList devices = cuda::list_devices();
  const auto waits = cuda::kernels_wait_for_upstream();
  ASSERT_TRUE(waits.ok()) << waits.status().to_string();
  if (devices.devices.front().compute_major < 9 || !*waits) {
    EngineConfig c;
    c.model = dir;
    c.device = "cuda:0";
    c.programmatic_launch = true;
    auto refused = Engine::create(c);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("run without --pdl"), std::string::npos)
        << refused.status().message();
    return;
  }
  for (const char* layout : {"last_exited", "shared"}) {
    for (const char* graphs : {"on", "off"}) {
      for (bool async : {false, true}) {
        RunSettings run{.layout = layout,
                        .graphs = graphs,
                        .kv_dtype = "bf16",
                        .exit_policy = "ouro_delayed",
                        .async = async,
                        .temperature = 0.7};
        const Generation plain = generate(dir, run);
        run.pdl = true;
        const Generation pdl = generate(dir, run);
        const std::string what =
            fmt::format("{} graphs {} async {}", layout, graphs, async ? "on" : "off");
        EXPECT_EQ(pdl.tokens, plain.tokens) << what;
        EXPECT_EQ(pdl.depths, plain.depths) << what;
      }
    }
  }
}

// cuDNN's fused attention drives the engine (packed prefill chunks, recurrent batches at mixed
// depths, both KV layouts): every request completes with all its tokens, and replayed graphs
// compute exactly what eager steps do (both run each bucket's one cuDNN plan).
TEST(GpuEngine, CudnnAttentionRunsTheEngine) {
  RLT_REQUIRE_CUDA_DEVICE();
  const attention::BackendEntry* cudnn = attention::find_backend("cudnn");
  if (cudnn == nullptr || !cudnn->built) GTEST_SKIP() << "this build has no cudnn backend";
  if (const Status usable = cudnn->library_check(); !usable.ok())
    GTEST_SKIP() << usable.to_string();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  for (const char* layout : {"last_exited", "shared"}) {
    const Generation eager = generate(dir, {.layout = layout,
                                            .graphs = "off",
                                            .kv_dtype = "bf16",
                                            .attention = "cudnn",
                                            .prompts = kTwoPrompts});
    const Generation graphs = generate(dir, {.layout = layout,
                                             .graphs = "on",
                                             .kv_dtype = "bf16",
                                             .attention = "cudnn",
                                             .prompts = kTwoPrompts});
    for (const auto& tokens : eager.tokens) EXPECT_EQ(tokens.size(), 12u) << layout;
    EXPECT_EQ(graphs.tokens, eager.tokens) << layout;
    EXPECT_EQ(graphs.depths, eager.depths) << layout;
    EXPECT_GT(graphs.graph_replays, 0) << layout;
  }
}

// Without --kv-cache-gib a GPU run's cache takes what --gpu-memory-utilization leaves of the
// device: at 0.5, under half the device's memory and most of it (the demo's weights and buffers
// are small); a share too small for anything is a clear error, as is one above 1.
TEST(GpuEngine, KvCacheSizedFromGpuMemoryUtilization) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = bf16_demo_dir();
  auto memory = runner::gpu_memory_info(0);
  ASSERT_TRUE(memory.ok()) << memory.status().to_string();
  EngineConfig c;
  c.model = dir;
  c.device = "cuda";
  c.gpu_memory_utilization = 0.5;
  {
    auto engine = Engine::create(c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    const EngineMetrics m = (*engine)->metrics();
    const ModelFootprint f = (*engine)->footprint();
    // Every page holds 16 tokens of one loop plane.
    const double kv = static_cast<double>(m.kv_total_blocks) * 16.0 *
                      static_cast<double>(f.kv_bytes_per_token_per_loop);
    const auto total = static_cast<double>(memory->total);
    EXPECT_LE(kv, 0.5 * total);
    EXPECT_GE(kv,
              0.5 * total - static_cast<double>(memory->total - memory->free) - 4.0 * (1 << 30));
    SamplingParams p;
    p.max_tokens = 4;
    ASSERT_TRUE((*engine)->add_request(1, {5, 9, 13}, p).ok());
    while ((*engine)->has_unfinished()) ASSERT_TRUE((*engine)->step().ok());
  }
  c.gpu_memory_utilization = 1e-6;
  auto starved = Engine::create(c);
  ASSERT_FALSE(starved.ok());
  EXPECT_NE(starved.status().message().find("--gpu-memory-utilization"), std::string::npos)
      << starved.status().to_string();
  c.gpu_memory_utilization = 1.5;
  EXPECT_FALSE(Engine::create(c).ok());
  std::filesystem::remove_all(test_dir());
}

// The largest batch's buffers are allocated at startup: a batch budget the device cannot hold is
// refused there, with the numbers and the way out, instead of aborting that batch mid-serving.
TEST(GpuEngine, BatchBudgetTheDeviceCannotHoldFailsAtStartup) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  EngineConfig c;
  c.model = bf16_demo_dir();
  c.device = "cuda";
  c.kv_cache_bytes = int64_t{1} << 30;
  c.max_num_batched_tokens = int32_t{1} << 30;  // terabytes of activations
  auto engine = Engine::create(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("cannot allocate"), std::string::npos)
      << engine.status().to_string();
  EXPECT_NE(engine.status().message().find("batch size"), std::string::npos)
      << engine.status().to_string();
  c.gpu_preallocate = false;  // the same budget starts, and a small batch runs
  engine = Engine::create(c);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  SamplingParams p;
  p.max_tokens = 2;
  ASSERT_TRUE((*engine)->add_request(1, {5, 9, 13}, p).ok());
  while ((*engine)->has_unfinished()) ASSERT_TRUE((*engine)->step().ok());
  std::filesystem::remove_all(test_dir());
}

TEST(GpuEngine, BadDeviceChoicesAreClearErrors) {
  EngineConfig c;
  c.model = "/nonexistent";
  c.device = "cuda:banana";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("expected cpu, cuda or cuda:N"), std::string::npos)
      << e.status().message();
  c.device = "cuda:99";
  e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--device cuda:99"), std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace rlt
