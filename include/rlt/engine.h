// The rlt engine API: add requests, step, read outputs. One engine owns one model, its KV cache,
// its scheduler and its runner; call it from one thread (the server gives it its own).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rlt/config.h"
#include "rlt/sampling_params.h"
#include "rlt/status.h"

namespace rlt {
namespace tok {
class Tokenizer;
}  // namespace tok

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // the n most likely tokens, most likely first
  // Prompt logprobs only: 1 + the tokens ranked before this one (larger logit, ties by lower id);
  // 0 for sampled tokens.
  int32_t rank = 0;
};

// What one step reports for a request: only what is new since the request's previous output
// (delta outputs), so that a step costs the same at token 10 and at token 10,000. A request's
// whole output is the concatenation of its outputs (RequestResult gathers it).
struct RequestOutput {
  uint64_t request_id = 0;
  std::vector<int32_t> new_token_ids;        // tokens added by this step
  std::vector<int32_t> new_exit_depths;      // loops behind each new token (the first is the model depth)
  std::vector<TokenLogprobs> new_logprobs;   // per new token, when the request asked for logprobs
  // Once, in the first output after the prompt is computed, when the request asked for
  // prompt_logprobs: one entry per prompt token after the first (token i + 1 given tokens 0..i).
  std::vector<TokenLogprobs> prompt_logprobs;
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
  std::vector<TokenLogprobs> prompt_logprobs;  // prompt tokens 1..n-1, when asked for
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
  DeviceStageTime prefill, prelude, recurrent, coda, verify;
  // The stages in execution order, with their names.
  std::array<std::pair<const char*, DeviceStageTime>, 5> named() const {
    return {{{"prefill", prefill}, {"prelude", prelude}, {"recurrent", recurrent}, {"coda", coda}, {"verify", verify}}};
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
  // RECURRENT batches, and those whose rows ran at two or more loop depths.
  int64_t recurrent_batches = 0;
  int64_t mixed_depth_batches = 0;
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
  // CPU runs: the kernel threads the last batch used (fewer than configured while other
  // processes keep cores busy, with adaptive_threads), and how many batches ran with fewer.
  int cpu_threads = 0;
  int64_t reduced_thread_batches = 0;
  // Structured output: tokens sampled under a constraint, and the wall time spent on their masks.
  int64_t constrained_tokens = 0;
  double mask_seconds = 0.0;
  // Speculative decoding: request verifications, the drafts they checked, the drafts accepted,
  // and the tokens they gave (accepted drafts plus the model's own token each).
  int64_t spec_verifications = 0;
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_verified_tokens = 0;
  // The verify pass's measured cost, fitted as a + b · rows (a plain step is a one-row pass):
  // what one more verified row costs next to a step. 0 until passes with several row counts ran.
  double spec_verify_fixed_seconds = 0.0, spec_verify_row_seconds = 0.0;
  double spec_acceptance_rate() const {
    return spec_draft_tokens ? static_cast<double>(spec_accepted_tokens) / static_cast<double>(spec_draft_tokens) : 0.0;
  }
  // Tokens per verification (1 + accepted drafts on average).
  double spec_mean_accepted_length() const {
    return spec_verifications ? static_cast<double>(spec_verified_tokens) / static_cast<double>(spec_verifications)
                              : 0.0;
  }
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
  // cache, scheduler and runner. Errors name what is wrong and how to fix it. A front end that has
  // built the model's tokenizer already passes it in (one tokenizer per process: a 50k-token
  // vocabulary takes ~15 MB); else the engine builds its own when it detokenizes.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config,
                                                std::shared_ptr<const tok::Tokenizer> tokenizer = nullptr);
  ~Engine();

  // Queues a request. Errors (bad parameters, impossible capacity, duplicate live id) leave the
  // engine unchanged. `exit_trace` is for exit policy "trace" only.
  Status add_request(uint64_t id, std::vector<int32_t> prompt, const SamplingParams& params,
                     std::vector<int32_t> exit_trace = {});
  // Runs one batch; returns an output for every request that got a token or finished. Every
  // added request ends with exactly one output with finished = true. With asynchronous
  // scheduling a step submits one batch and returns the results of the one before it.
  Result<std::vector<RequestOutput>> step();
  // Compiles a structured-output constraint into the engine's cache, or says why it cannot be
  // (kInvalidArgument naming what is wrong or unsupported). Thread-safe and callable while another
  // thread steps the engine, so that a front end reports bad constraints before queueing and
  // keeps compilation off the engine's loop; add_request compiles (from the cache) either way.
  Status prepare_structured_outputs(const StructuredOutputs& spec) const;
  // Cancels a request; its final output ("abort") comes with the next step().
  Status abort(uint64_t id);
  bool has_unfinished() const;
  // Work for the engine's spare time: weights still computed from the checkpoint until packed
  // (EngineConfig::defer_packing). step() packs a slice before each batch after the first; a
  // loop that idles (a server between requests) calls do_idle_work() while has_idle_work().
  bool has_idle_work() const;
  // One slice (the lm head or one layer's matrices: tens of milliseconds on a 1B model).
  void do_idle_work();

  // The attention selection report as JSON (requested, selected, reason, candidates).
  const std::string& attention_info() const;
  std::string attention_backend() const;
  EngineMetrics metrics() const;
  int64_t vocab_size() const;
  int64_t total_loops() const;
  ModelFootprint footprint() const;
  std::vector<int32_t> eos_token_ids() const;
  // The tokenizer outputs are detokenized with (null when the engine does not detokenize).
  std::shared_ptr<const tok::Tokenizer> tokenizer() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlt
