// Executes one batch on the CPU (stages as in runner/model_input.h): the model math over the
// paged KV cache in host memory. Owns the per-request recurrent state (the hidden vector carried
// between loops and stages; for Huginn also the prelude's output the steps read, and the exit
// criterion's running state).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/cpu_share.h"
#include "kv/cpu_kv_storage.h"
#include "model/exit_criteria.h"
#include "model/ouro_core.h"
#include "runner/model_runner.h"
#include "runner/paged_attention.h"
#include "runner/stage_driver.h"

namespace rlt::runner {

class CpuModelRunner final : public ModelRunner {
 public:
  // `threads`: the kernel threads configured; with `adaptive_threads` each batch uses fewer
  // while other processes keep cores busy (common/cpu_share.h).
  CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                 std::unique_ptr<kv::CpuKVStorage> storage,
                 std::unique_ptr<attention::AttentionBackend> backend, int threads,
                 bool adaptive_threads);

  // Computes the batch at once; collect() hands out its results.
  Status submit(const ModelInput& input) override;
  Status collect(uint64_t seq, BatchResult* out) override;

  kv::CpuKVStorage& storage() override { return *storage_; }
  void release(kv::RequestId id) override {
    hidden_.erase(id);
    recurrence_.erase(id);
  }
  double attention_seconds() const override { return attention_.seconds(); }
  bool scores_prompts() const override { return true; }
  int cpu_threads() const override { return threads_now_; }
  int64_t reduced_thread_batches() const override { return reduced_batches_; }

 private:
  class Stages;  // the stage driver's steps on the CPU (cpu_model_runner.cpp)
  Status run(const ModelInput& input, BatchResult* out);
  // Sets this batch's thread count from the CPU share (adaptive threads).
  void adapt_threads();
  std::vector<float>& state(kv::RequestId id);
  // Huginn: what a token's recurrence carries besides its state.
  struct Recurrence {
    std::vector<float> injection;                    // the prelude's output, [hidden]
    std::optional<model::CriterionState> criterion;  // from the token's first step
    // The logits of the current state when its step read it out (for an exit criterion): the
    // token's CODA reuses them instead of reading the same state out again.
    std::vector<float> logits;
    bool logits_current = false;
  };

  std::shared_ptr<const model::OuroModel> model_;
  model::OuroCore core_;
  std::unique_ptr<kv::CpuKVStorage> storage_;
  PagedAttention attention_;
  model::CoreScratch scratch_;
  std::unordered_map<kv::RequestId, std::vector<float>> hidden_;
  std::unordered_map<kv::RequestId, Recurrence> recurrence_;
  // Computed, uncollected batches, oldest first.
  std::deque<std::pair<uint64_t, BatchResult>> done_;
  BatchResult collected_;  // the last collected results (its logits back runner_logits)
  // Reused per batch.
  std::vector<float> h_;
  std::vector<int64_t> positions_;
  std::vector<float> injection_;      // Huginn: the pass's rows' prelude outputs
  std::vector<float> step_logits_;    // Huginn: the readout's logits for the exit criteria
  std::vector<float> score_h_, score_logits_;  // a block of scored rows and their logits
  std::optional<CpuShareMonitor> share_;  // set with adaptive threads
  int threads_max_;
  int threads_now_;
  int64_t reduced_batches_ = 0;
};

}  // namespace rlt::runner
