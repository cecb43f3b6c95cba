// Executes one scheduled batch on the CPU (stages as in model_runner.h): the model math over the
// paged KV cache in host memory. Owns the per-request recurrent state (the hidden vector carried
// between loops and stages).
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "engine/paged_attention.h"
#include "kv/kv_cache_manager.h"
#include "model/ouro_core.h"
#include "sched/scheduler.h"

namespace rlt::engine {

class CpuModelRunner final : public ModelRunner {
 public:
  CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                 std::unique_ptr<kv::CpuKVStorage> storage,
                 std::unique_ptr<attention::AttentionBackend> backend,
                 const attention::BackendCapabilities& caps, kv::KVLayout layout);

  // Computes the batch at once; collect() hands out its results.
  Status submit(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                const kv::KVCacheManager& kv, const BatchInputs& inputs) override;
  Status collect(uint64_t seq, BatchResult* out) override;

  kv::CpuKVStorage& storage() override { return *storage_; }
  void release(kv::RequestId id) override { hidden_.erase(id); }
  size_t live_states() const override { return hidden_.size(); }

 private:
  Status run(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
             const kv::KVCacheManager& kv, BatchResult* out);
  Status prefill(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                 const kv::KVCacheManager& kv);
  Status prefill_waves(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                       const kv::KVCacheManager& kv);
  std::vector<float>& state(kv::RequestId id);
  // Embeds the staged rows (tokens_, rows_) into h_ and fills positions_.
  void stage_rows();
  // Copies the hidden row of every staged row that ends its prompt into its request's state.
  void keep_prompt_states(const sched::Scheduler& scheduler);

  std::shared_ptr<const model::OuroModel> model_;
  model::OuroCore core_;
  std::unique_ptr<kv::CpuKVStorage> storage_;
  PagedAttention attention_;
  kv::KVLayout layout_;
  model::CoreScratch scratch_;
  std::unordered_map<kv::RequestId, std::vector<float>> hidden_;
  // Computed, uncollected batches, oldest first.
  std::deque<std::pair<uint64_t, BatchResult>> done_;
  BatchResult collected_;  // the last collected results (its logits back runner_logits)
  // Reused per batch.
  std::vector<float> h_;
  std::vector<int64_t> positions_;
  std::vector<int32_t> tokens_;
  std::vector<attention::PlannedRow> rows_;
  std::vector<int32_t> depths_;
};

}  // namespace rlt::engine
