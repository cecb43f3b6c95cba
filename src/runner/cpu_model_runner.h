// Executes one batch on the CPU (stages as in runner/model_input.h): the model math over the
// paged KV cache in host memory. Owns the per-request recurrent state (the hidden vector carried
// between loops and stages).
#pragma once

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kv/cpu_kv_storage.h"
#include "model/ouro_core.h"
#include "runner/model_runner.h"
#include "runner/paged_attention.h"
#include "runner/stage_driver.h"

namespace rlt::runner {

class CpuModelRunner final : public ModelRunner, private StageExecutor {
 public:
  CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                 std::unique_ptr<kv::CpuKVStorage> storage,
                 std::unique_ptr<attention::AttentionBackend> backend);

  // Computes the batch at once; collect() hands out its results.
  Status submit(const ModelInput& input) override;
  Status collect(uint64_t seq, BatchResult* out) override;

  kv::CpuKVStorage& storage() override { return *storage_; }
  void release(kv::RequestId id) override { hidden_.erase(id); }
  double attention_seconds() const override { return attention_.seconds(); }

 private:
  Status run(const ModelInput& input, BatchResult* out);
  // The stages' steps (runner/stage_driver.h) on the CPU kernels; h_ holds the pass's rows.
  Status embed_pass(const PassInput& pass) override;
  Status bind_pass(const PassInput& pass) override;
  Status pass_loop(const PassInput& pass, size_t depth_index) override;
  Status keep_states(const PassInput& pass) override;
  Status prelude(std::span<const kv::RequestId> requests, std::span<const int32_t> tokens) override;
  Status recurrent(const PassInput& pass) override;
  Status coda(const ModelInput& input) override;
  std::vector<float>& state(kv::RequestId id);

  std::shared_ptr<const model::OuroModel> model_;
  model::OuroCore core_;
  std::unique_ptr<kv::CpuKVStorage> storage_;
  PagedAttention attention_;
  model::CoreScratch scratch_;
  std::unordered_map<kv::RequestId, std::vector<float>> hidden_;
  // Computed, uncollected batches, oldest first.
  std::deque<std::pair<uint64_t, BatchResult>> done_;
  BatchResult collected_;  // the last collected results (its logits back runner_logits)
  BatchResult* result_ = nullptr;  // the batch being run's results
  // Reused per batch.
  std::vector<float> h_;
  std::vector<int64_t> positions_;
};

}  // namespace rlt::runner
