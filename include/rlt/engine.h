// The rlt engine API: add requests, step, read outputs. One engine owns one model, its KV cache,
// its scheduler and its runner; call it from one thread (the server gives it its own).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlt/sampling_params.h"
#include "rlt/status.h"

namespace rlt {

// Every engine knob with its default (documented in docs/scheduling.md and docs/kv-cache.md).
struct EngineConfig {
  // A Hugging Face model folder or a .gguf file.
  std::string model;
  // GGUF files: the dtype quantized weights are dequantized into at load: "bf16", "f32", "f16".
  std::string dtype = "bf16";

  // KV cache
  int32_t block_size = 16;                       // tokens per page
  int64_t num_kv_blocks = 0;                     // 0: as many as kv_cache_bytes holds
  // K + V pools; 0: 1 GiB on the CPU, and on a GPU what gpu_memory_utilization leaves.
  int64_t kv_cache_bytes = 0;
  // GPU runs without kv_cache_bytes: the share of the device's memory the run may take (weights,
  // activations and workspaces included); the KV cache gets the rest, as vLLM sizes it.
  double gpu_memory_utilization = 0.9;
  std::string kv_layout = "last_exited";         // or "shared"
  std::string kv_dtype = "auto";                 // auto (= weights), f32, bf16, f16
  bool enable_prefix_caching = false;
  double watermark = 0.01;                       // admission headroom, share of the pool

  // Scheduler. The batch budgets' 0 is the device's default: 8 / 128 / 128 on the CPU; 256 /
  // 8192 / 2048 on a GPU, whose batches need many rows to use it (vLLM's scale).
  int32_t max_num_seqs = 0;
  int32_t max_num_batched_tokens = 0;
  int32_t prefill_chunk_size = 0;
  int32_t max_prefill_batches_before_decode = 1;
  int32_t admission_scan_limit = 64;
  int32_t max_admission_bypasses = 8;
  std::string batch_mode = "refill";             // or "no_refill"
  std::string policy = "fcfs";                   // or "priority"
  std::string exit_policy = "ouro";              // or "ouro_delayed", "trace"
  bool incremental_kv = true;
  bool enable_preemption = false;
  int64_t preemption_host_bytes = int64_t{4} << 30;

  // Attention
  std::string attention_backend = "auto";
  bool require_deterministic_attention = false;
  bool require_packed_prefill = false;       // attention must declare packed_prefill
  // Asynchronous scheduling: the next batch is scheduled and submitted before the previous one's
  // results are back (one-step lookahead), so host work overlaps device work. Needs exit_policy
  // "ouro_delayed" or "trace"; on CUDA the attention backend must never synchronize with the host.
  bool async_scheduling = false;
  // CUDA graphs for the recurrent core (GPU runs): "auto" (capture per batch bucket, run eagerly
  // if capture fails), "on" (required: the attention backend must be graph-safe and a failed
  // capture is an error), "off".
  std::string cuda_graphs = "auto";
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
  // Activations entering the linear layers: "f32" (exact f32 products), or "bf16" for bf16
  // weights on CPUs with AVX512_BF16 (rounded to bf16 as a bf16 PyTorch model computes; about
  // twice the prefill rate).
  std::string activation_dtype = "f32";
  // Where the model runs: "cpu", or "cuda" / "cuda:N" (CUDA builds, device N; weights in their
  // stored dtype, KV pools and attention on the GPU).
  std::string device = "cpu";
};

// The configuration with its device's defaults in place of the knobs left at 0 (a GPU's KV cache
// size comes later, from its free memory). Engine::create applies it; whoever sizes something by
// the engine's batch (the server's request limit) can ask what the engine will use.
EngineConfig with_device_defaults(EngineConfig config);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // the n most likely tokens, most likely first
};

// What one step reports for a request: only what is new since the request's previous output
// (delta outputs), so that a step costs the same at token 10 and at token 10,000. A request's
// whole output is the concatenation of its outputs (RequestResult gathers it).
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<int32_t> new_token_ids;        // tokens added by this step
  std::vector<int32_t> new_exit_depths;      // loops behind each new token (the first is the model depth)
  std::vector<TokenLogprobs> new_logprobs;   // per new token, when the request asked for logprobs
  // Per new token, the text it completes (special tokens skipped, complete UTF-8 only); empty
  // strings when the engine has no tokenizer or config.detokenize is off.
  std::vector<std::string> new_token_texts;
  // This step's text: the new tokens' texts, then, on the finishing output, what the detokenizer
  // held back until the end (final_text).
  std::string new_text;
  std::string final_text;                    // finishing output only: the held-back text
  int64_t num_tokens = 0;                    // tokens generated so far, this step's included
  bool finished = false;
  std::string finish_reason;                 // "stop", "length" or "abort" once finished
  // An "abort" the engine decided on its own (a failed batch, a broken logits row): why. Empty
  // for every other output, a caller's abort() included.
  std::string error;
  int32_t prompt_tokens = 0;
};

// A request's whole output, gathered from its delta outputs (for callers that want everything
// at the end: the CLI, benchmarks, tests).
struct RequestResult {
  uint64_t request_id = 0;
  std::vector<int32_t> token_ids;
  std::vector<int32_t> exit_depths;
  std::vector<TokenLogprobs> logprobs;
  std::string text;
  bool finished = false;
  std::string finish_reason;
  std::string error;
  int32_t prompt_tokens = 0;

  // Adds one output of this request (outputs in the order the engine reported them).
  void append(const RequestOutput& output);
};

// GPU runs: the device time of one stage's batches — each batch's span on the device's timeline,
// from its first upload (after the host planned it) to its last operation, launch gaps inside the
// batch included; timed with CUDA events — and how many batches ran.
struct DeviceStageTime {
  double milliseconds = 0.0;
  int64_t batches = 0;
};
struct DeviceStageTimes {
  DeviceStageTime prefill, prelude, recurrent, coda;
  // The stages in execution order, with their names.
  std::array<std::pair<const char*, DeviceStageTime>, 4> named() const {
    return {{{"prefill", prefill}, {"prelude", prelude}, {"recurrent", recurrent}, {"coda", coda}}};
  }
};

struct EngineMetrics {
  int32_t waiting = 0;
  int32_t running = 0;
  int32_t suspended = 0;
  int32_t kv_total_blocks = 0;
  int32_t kv_used_blocks = 0;
  double kv_usage = 0.0;
  int64_t prefix_queries = 0;   // prompt pages looked up
  int64_t prefix_hits = 0;      // pages served from the prefix cache
  int64_t generated_tokens = 0;
  int64_t loops_run = 0;        // loops behind generated tokens (prefill tokens count the full depth)
  double mean_loops_per_token = 0.0;
  int64_t preemptions = 0;
  int64_t batches = 0;
  int64_t cuda_graph_replays = 0;  // GPU runs: recurrent batches replayed from a captured graph
  int64_t device_sampled_batches = 0;  // GPU runs: CODA batches sampled on the device
  int64_t lookahead_batches = 0;   // asynchronous scheduling: batches submitted while one ran
  DeviceStageTimes device_time;    // GPU runs: device time by stage (zeros on the CPU)
  // CPU runs: wall time spent in attention (K/V writes and the backend's kernels), so that host
  // overhead can be told apart from attention, which grows with the context by nature.
  double attention_seconds = 0.0;
  // Wall time inside the model runner (submit and collect: the model's compute on the CPU, the
  // wait for the device on a GPU); the rest of a step is the engine's own host work.
  double runner_seconds = 0.0;
};

// What one generated token reads, for rooflines: the linear weights of one loop of the core (all
// layers), the lm head, and the K/V one context token holds per loop depth.
struct ModelFootprint {
  int64_t core_weight_bytes_per_loop = 0;
  int64_t lm_head_bytes = 0;
  int64_t kv_bytes_per_token_per_loop = 0;
  int64_t loops = 0;  // total_ut_steps
  std::string kernel_target;  // SIMD target of the CPU kernels
  std::string activation_dtype;  // "f32" or "bf16"
  int threads = 0;            // CPU kernel threads in use
  std::string device = "cpu";  // where the model runs: "cpu" or "cuda:N"
};

class Engine {
 public:
  // Loads the model, selects the attention backend (before sizing the KV cache), builds the
  // cache, scheduler and runner. Errors name what is wrong and how to fix it.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  // Queues a request. Errors (bad parameters, impossible capacity, duplicate live id) leave the
  // engine unchanged. `exit_trace` is for exit policy "trace" only.
  Status add_request(uint64_t id, std::vector<int32_t> prompt, const SamplingParams& params,
                     std::vector<int32_t> exit_trace = {});
  // Runs one batch; returns an output for every request that got a token or finished. Every
  // added request ends with exactly one output with finished = true. With asynchronous
  // scheduling a step submits one batch and returns the results of the one before it.
  Result<std::vector<RequestOutput>> step();
  // Cancels a request; its final output ("abort") comes with the next step().
  Status abort(uint64_t id);
  bool has_unfinished() const;

  // The attention selection report as JSON (requested, selected, reason, candidates).
  const std::string& attention_info() const;
  std::string attention_backend() const;
  EngineMetrics metrics() const;
  int64_t vocab_size() const;
  int64_t total_loops() const;
  ModelFootprint footprint() const;
  std::vector<int32_t> eos_token_ids() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlt
