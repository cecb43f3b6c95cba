// What the engine asks of a model runner, whatever the device: execute one batch described by a
// self-contained ModelInput (runner/model_input.h: stages, rows, planned passes) over the paged KV
// storage it owns, keep the per-request recurrent state (the hidden vector carried between
// loops and stages), and expose the KV storage the manager's plans (finalize copies, snapshots)
// run on. Runners never see the scheduler or the KV manager.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_storage.h"
#include "rlt/engine.h"
#include "rlt/status.h"
#include "runner/model_input.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace rlt::runner {

// PREFILL: the prompt logprobs of one scored row (PassInput::scores): position `position` of
// request `request` scores the prompt's token at position + 1.
struct PromptScore {
  kv::RequestId request = 0;
  int32_t position = 0;
  sampling::ScoredToken scored;  // the target's raw logprob, rank and the top list
  // Non-empty when the row's logits were broken (NaN, +inf): that request fails, no other.
  std::string error;
};

struct BatchResult {
  std::vector<float> gate_logits;  // RECURRENT: [items]
  std::vector<double> exit_values;  // RECURRENT, Huginn's exit criteria: [items]
  std::vector<float> logits;       // CODA: [items, vocab]
  // CODA from a runner that keeps the logits in its own (pinned) buffer instead: valid until its
  // next collect(). Read through all_logits().
  std::span<const float> runner_logits;
  // CODA batches may be sampled by the runner on its device with the sampler's rules
  // (ModelInput::sampling): then device_tokens[row] is the token, or -1 with the sampler's error in
  // device_sample_errors[row], and no logits come back.
  std::vector<int32_t> device_tokens;
  std::vector<std::string> device_sample_errors;
  // With device_tokens, when some row asked for logprobs: per row, its token's raw logprob and
  // top list (SampledToken's fields; read only for rows that asked).
  std::vector<sampling::SampledToken> device_logprobs;
  // PREFILL: one per scored row, in pass order.
  std::vector<PromptScore> prompt_scores;

  std::span<const float> all_logits() const {
    return runner_logits.empty() ? std::span<const float>(logits) : runner_logits;
  }
};

// Batches run in submission order: a batch sees everything earlier ones wrote (K/V, recurrent
// states), so the engine may submit the next batch before collecting the previous one's results
// (asynchronous scheduling). A runner holds at most kMaxInFlight uncollected batches.
class ModelRunner {
 public:
  static constexpr int kMaxInFlight = 2;

  virtual ~ModelRunner() = default;
  // Queues `input` (a device runner returns once its work is enqueued; the CPU runner computes it
  // now). On error the batch has no results to collect (part of its work may still have been
  // queued: the engine aborts its requests).
  virtual Status submit(const ModelInput& input) = 0;
  // The results of the oldest uncollected batch, which must be batch `seq`; waits for it. A
  // runner_logits span stays valid until the next collect().
  virtual Status collect(uint64_t seq, BatchResult* out) = 0;
  virtual kv::KVStorage& storage() = 0;
  // Drops a finished or aborted request's recurrent state.
  virtual void release(kv::RequestId id) = 0;
  // Batches replayed from captured CUDA graphs (0 for runners without graphs).
  virtual int64_t graph_replays() const { return 0; }
  // CODA batches the runner sampled on its device (BatchResult::device_tokens).
  virtual int64_t device_sampled_batches() const { return 0; }
  // Device time of the collected batches, by stage (device runners).
  virtual DeviceStageTimes device_stage_times() const { return {}; }
  // Host runners: wall time spent in attention so far (0 where attention runs on a device).
  virtual double attention_seconds() const { return 0.0; }
  // Host runners: the kernel threads the last batch used, and the batches run with fewer than
  // configured (0 where kernels run on a device).
  virtual int cpu_threads() const { return 0; }
  virtual int64_t reduced_thread_batches() const { return 0; }
  // Whether the runner scores prompt rows (PassInput::scores): a capability the engine checks at
  // admission, so that a request asking for prompt logprobs is refused, not silently unscored.
  virtual bool scores_prompts() const { return false; }
};

// The in-flight rules every runner enforces, worded once: a batch may be submitted while fewer
// than kMaxInFlight are uncollected, and batches are collected in submission order (`oldest`:
// the oldest uncollected batch, if any).
Status check_can_submit(uint64_t seq, size_t uncollected);
Status check_collect_order(uint64_t seq, std::optional<uint64_t> oldest);

}  // namespace rlt::runner
