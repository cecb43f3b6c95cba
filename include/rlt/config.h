// The engine's configuration: every knob with its type and its default, defined here once
// (documented in docs/scheduling.md and docs/kv-cache.md). Names are parsed once, at the
// boundary (CLI flags, server options, tests), with the parse_* functions below; the engine and
// its modules read the enums. Plain data; include/rlt/ compiles on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rlt/status.h"

namespace rlt {

// Where a token's K/V live: one plane per loop depth (a token that exits early gives its last
// loop's K/V to the deeper planes), or one plane every loop overwrites.
enum class KVLayout : uint8_t { kLastExited, kShared };
// The K/V cache's element type; kAuto: the weights' float type (bf16 for quantized weights);
// kQ8_0: GGML q8_0 blocks (CPU attention only; 34 bytes per 32 values, lossy: docs/kv-cache.md).
enum class KVDType : uint8_t { kAuto, kF32, kBF16, kF16, kQ8_0 };
// GGUF files: how quantized weights are loaded. kAuto: the CPU kernels compute on Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K and Q6_K as stored (other quantized types, and GPU runs, dequantize to bf16);
// kBF16 / kF32 / kF16: every quantized weight dequantized into that type at load.
enum class WeightDType : uint8_t { kAuto, kBF16, kF32, kF16 };
// Safetensors checkpoints: quantize the linear layers' matrices at load into a GGML block type the
// CPU computes on (norms, the exit gate and the embedding, hence a tied lm head, stay as stored).
enum class QuantizeType : uint8_t { kNone, kQ8_0, kQ4_K, kQ6_K };
// Activations entering the CPU's linear layers: f32 (exact f32 products), or bf16 for bf16
// weights on CPUs with AVX512_BF16 (rounded as a bf16 PyTorch model computes; about twice the
// prefill rate).
// Linear-layer activations: f32 (exact products), bf16 (bf16 weights on AVX512_BF16 CPUs) or int8
// (quantized weights: activations rounded to 8 bits per 32 columns, integer dot products).
enum class ActivationDType : uint8_t { kF32, kBF16, kInt8 };
enum class BatchMode : uint8_t {
  kRefill,    // a request leaving the loop is replaced at the next loop boundary (Continuous Depth
              // Batching)
  kNoRefill,  // cohorts: a recurrent batch drains completely before new work joins
};
enum class QueuePolicy : uint8_t { kFcfs, kPriority };
// When a generated token leaves the loop: ouro (the exit gate's rule after each loop),
// ouro_delayed (the same decision applied one loop later, for asynchronous scheduling), trace
// (depths given per request).
enum class ExitPolicy : uint8_t { kOuro, kOuroDelayed, kTrace };
// What decides a generated token's exit (a request's choice; docs/models.md): gate (the model's
// exit gate with exit_threshold: Ouro; a model without a gate runs every loop), or one of
// Huginn's per-token criteria (model/exit_criteria.h): none, latent-diff, entropy-diff, kl,
// minp-kl, argmax-stability.
enum class ExitCriterion : uint8_t { kGate, kNone, kLatentDiff, kEntropyDiff, kKl, kMinpKl, kArgmaxStability };
// CUDA graphs for the recurrent core (GPU runs): kAuto captures per batch bucket and runs eagerly
// if capture fails; kOn requires them (a graph-safe attention backend; a failed capture is an
// error); kOff never captures.
enum class CudaGraphs : uint8_t { kAuto, kOn, kOff };
// Speculative decoding (docs/speculative.md): where draft tokens come from. kOff: plain decoding;
// kNgram: prompt lookup (the continuation of the last n tokens' latest earlier occurrence in the
// prompt and output); kSelf: the same looped model run for only its first draft_loops loops.
enum class SpeculativeMethod : uint8_t { kOff, kNgram, kSelf };

// The names flags and options use ("last_exited", "auto", "bf16", "no_refill", ...). Each parse_*
// accepts exactly the names name() returns and otherwise says which are accepted.
Result<KVLayout> parse_kv_layout(std::string_view name);
Result<KVDType> parse_kv_dtype(std::string_view name);
Result<WeightDType> parse_weight_dtype(std::string_view name);
Result<QuantizeType> parse_quantize_type(std::string_view name);
Result<ActivationDType> parse_activation_dtype(std::string_view name);
Result<BatchMode> parse_batch_mode(std::string_view name);
Result<QueuePolicy> parse_queue_policy(std::string_view name);
Result<ExitPolicy> parse_exit_policy(std::string_view name);
Result<ExitCriterion> parse_exit_criterion(std::string_view name);
Result<CudaGraphs> parse_cuda_graphs(std::string_view name);
Result<SpeculativeMethod> parse_speculative_method(std::string_view name);
std::string_view name(KVLayout v);
std::string_view name(KVDType v);
std::string_view name(WeightDType v);
std::string_view name(QuantizeType v);
std::string_view name(ActivationDType v);
std::string_view name(BatchMode v);
std::string_view name(QueuePolicy v);
std::string_view name(ExitPolicy v);
std::string_view name(ExitCriterion v);
std::string_view name(CudaGraphs v);
std::string_view name(SpeculativeMethod v);

// Speculative decoding's settings: the engine's default for every request (a request's
// SamplingParams::speculative overrides method, num_tokens and draft_loops). Drafts are verified
// in one pass at the model's full depth, so the output equals plain decoding's token for token.
struct SpeculativeConfig {
  static constexpr int32_t kMaxTokens = 32;  // drafts per step a request may ask for
  SpeculativeMethod method = SpeculativeMethod::kOff;
  int32_t num_tokens = 4;   // K: drafts verified per step at most, in [1, kMaxTokens]
  int32_t draft_loops = 0;  // self: loops a draft runs, in [1, depth - 1]; 0 = half the depth
  // ngram: the longest and shortest suffix looked up (the longest that matches wins).
  int32_t ngram_max = 4, ngram_min = 2;
  // Per request, K from its recent acceptance and the measured cost of a verify pass's rows
  // (0 where drafts would cost more than they save: large, compute-bound batches); false: K
  // drafts whenever the drafter has them.
  bool adaptive = true;
  // Benchmarks only (0 = off): verification keeps each draft with this probability instead of
  // checking it against the model's token, so that the mechanism's cost can be measured at a
  // chosen acceptance rate on random weights. The output is then NOT plain decoding's.
  double forced_acceptance = 0.0;
  Status validate() const;
};

// Every engine knob with its default (documented in docs/scheduling.md and docs/kv-cache.md).
// The scheduling defaults the engine and the scheduler's own configuration (sched/) share,
// defined once here.
struct SchedulingDefaults {
  // Batch budgets for a knob left at 0: the CPU's, and a GPU's, whose batches need many rows to
  // use it (vLLM's scale).
  int32_t max_num_seqs = 8, max_num_batched_tokens = 128, prefill_chunk_size = 128;
  int32_t max_prefill_batches_before_decode = 1;
  int32_t admission_scan_limit = 64;   // waiting requests looked at per admission pass
  int32_t max_admission_bypasses = 8;  // how often a deferred request may be overtaken
  int64_t preemption_host_bytes = int64_t{4} << 30;  // host memory for suspended requests' KV
};
inline constexpr SchedulingDefaults kCpuScheduling{};
inline constexpr SchedulingDefaults kGpuScheduling{256, 8192, 2048};

struct EngineConfig {
  // A Hugging Face model folder or a .gguf file.
  std::string model;
  // GGUF files: quantized weights computed on as stored (auto), or dequantized into a float type.
  WeightDType dtype = WeightDType::kAuto;
  // Safetensors checkpoints: the linear layers quantized at load (CPU runs).
  QuantizeType quantize = QuantizeType::kNone;
  // CPU runs: the packed-weight cache's folder (docs/loading.md); empty: packed at every start.
  std::string packed_cache_dir;
  // CPU runs, bf16 / f16 checkpoints that have to be packed (no cache file to map): answer at
  // once from the checkpoint's rows and pack one layer at a time between batches and while idle,
  // instead of packing before the first request (same results bit for bit; docs/loading.md).
  bool defer_packing = true;

  // KV cache
  int32_t block_size = 16;    // tokens per page
  int64_t num_kv_blocks = 0;  // 0: as many as kv_cache_bytes holds
  // K + V pools; 0: 1 GiB on the CPU, and on a GPU what gpu_memory_utilization leaves.
  int64_t kv_cache_bytes = 0;
  // GPU runs without kv_cache_bytes: the share of the device's memory the run may take (weights,
  // activations and workspaces included); the KV cache gets the rest, as vLLM sizes it.
  double gpu_memory_utilization = 0.9;
  KVLayout kv_layout = KVLayout::kLastExited;
  KVDType kv_dtype = KVDType::kAuto;
  bool enable_prefix_caching = false;
  double watermark = 0.01;  // admission headroom, share of the pool

  // Scheduler. The batch budgets' 0 is the device's default (kCpuScheduling, kGpuScheduling).
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t prefill_chunk_size = 0;
  int32_t max_prefill_batches_before_decode = kCpuScheduling.max_prefill_batches_before_decode;
  int32_t admission_scan_limit = kCpuScheduling.admission_scan_limit;
  int32_t max_admission_bypasses = kCpuScheduling.max_admission_bypasses;
  BatchMode batch_mode = BatchMode::kRefill;
  QueuePolicy policy = QueuePolicy::kFcfs;
  ExitPolicy exit_policy = ExitPolicy::kOuro;
  bool incremental_kv = true;
  bool enable_preemption = false;
  int64_t preemption_host_bytes = kCpuScheduling.preemption_host_bytes;

  // Speculative decoding (off by default).
  SpeculativeConfig speculative;

  // Attention
  std::string attention_backend = "auto";
  bool require_deterministic_attention = false;
  bool require_packed_prefill = false;  // attention must declare packed_prefill
  // Asynchronous scheduling: the next batch is scheduled and submitted before the previous one's
  // results are back (one-step lookahead), so host work overlaps device work. Needs exit_policy
  // "ouro_delayed" or "trace"; on CUDA the attention backend must never synchronize with the host.
  bool async_scheduling = false;
  // CUDA graphs for the recurrent core (GPU runs).
  CudaGraphs cuda_graphs = CudaGraphs::kAuto;
  // Programmatic dependent launch (GPU runs on sm_90+): each of rlt's kernels may begin launching
  // while the one before it finishes, hiding most of the gap between short kernels. Off by
  // default until measured; a GPU below sm_90 refuses it.
  bool programmatic_launch = false;
  // GPU runs: sample on the device (the host sampler's rules, penalties and logprobs included),
  // or copy every logits row to the host sampler (the reference path).
  bool device_sampling = true;
  // GPU runs: allocate the activations, logits, sampling and request-state buffers of the largest
  // batch at startup, so that a batch budget the device cannot hold fails there rather than
  // aborting the first batch that large; false: allocate them as batches need them.
  bool gpu_preallocate = true;

  // Detokenize outputs with the model's tokenizer (when it has one): RequestOutput::new_text.
  bool detokenize = true;

  uint64_t seed = 0;  // requests without a seed derive theirs from this and their id
  int threads = 0;    // CPU kernel threads (0 = all cores)
  // CPU runs: use fewer of those threads while other processes keep cores busy (results do not
  // depend on the thread count; common/cpu_share.h says why it pays).
  bool adaptive_threads = true;
  // Activations entering the linear layers.
  ActivationDType activation_dtype = ActivationDType::kF32;
  // Where the model runs: "cpu", or "cuda" / "cuda:N" (CUDA builds, device N; weights in their
  // stored dtype, KV pools and attention on the GPU).
  std::string device = "cpu";
};

// The configuration with its device's defaults in place of the knobs left at 0 (a GPU's KV cache
// size comes later, from its free memory). Engine::create applies it; whoever sizes something by
// the engine's batch (the server's request limit) can ask what the engine will use.
EngineConfig with_device_defaults(EngineConfig config);

}  // namespace rlt
