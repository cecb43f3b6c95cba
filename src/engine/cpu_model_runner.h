// Executes one scheduled batch on the CPU: the stage's model math over the paged KV cache. Owns
// the per-request recurrent state (the hidden vector carried between loops and stages).
//
//   PREFILL   embed the chunk, then every loop over all chunk rows (loop-major; one plan shared
//             by all depths); keeps the last prompt row's hidden state.
//             Under the `shared` layout positions go in waves: all loops of a position first.
//   PRELUDE   embed the last sampled token.
//   RECURRENT one loop per row at the row's own depth; returns each row's gate logit.
//   CODA      the lm head on each row's hidden state; returns logits.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/paged_attention.h"
#include "kv/kv_cache_manager.h"
#include "model/ouro_core.h"
#include "sched/scheduler.h"

namespace rlt::engine {

struct BatchResult {
  std::vector<float> gate_logits;  // RECURRENT: [items]
  std::vector<float> logits;       // CODA: [items, vocab]
};

class CpuModelRunner {
 public:
  CpuModelRunner(std::shared_ptr<const model::OuroModel> model, std::unique_ptr<kv::CpuKVStorage> storage,
                 std::unique_ptr<attention::AttentionBackend> backend, const attention::BackendCapabilities& caps,
                 kv::KVLayout layout);

  Status execute(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                 const kv::KVCacheManager& kv, BatchResult* out);

  kv::CpuKVStorage& storage() { return *storage_; }
  // Drops a finished or aborted request's recurrent state.
  void release(kv::RequestId id) { hidden_.erase(id); }
  size_t live_states() const { return hidden_.size(); }

 private:
  Status prefill(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler, const kv::KVCacheManager& kv);
  Status prefill_waves(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                       const kv::KVCacheManager& kv);
  std::vector<float>& state(kv::RequestId id);

  std::shared_ptr<const model::OuroModel> model_;
  model::OuroCore core_;
  std::unique_ptr<kv::CpuKVStorage> storage_;
  PagedAttention attention_;
  kv::KVLayout layout_;
  model::CoreScratch scratch_;
  std::unordered_map<kv::RequestId, std::vector<float>> hidden_;
  // Reused per batch.
  std::vector<float> h_;
  std::vector<int64_t> positions_;
  std::vector<int32_t> tokens_;
  std::vector<attention::PlannedRow> rows_;
  std::vector<int32_t> depths_;
};

}  // namespace rlt::engine
