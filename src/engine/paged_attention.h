// The model's attention over the paged KV cache: a model::CoreAttention that writes each row's
// K/V into its depth plane's page slot and runs the selected backend with metadata planned once
// per pass (and bound to every layer's call).
#pragma once

#include <memory>
#include <vector>

#include "attention/backend.h"
#include "attention/capabilities.h"
#include "attention/metadata_planner.h"
#include "engine/pass_plan.h"
#include "kv/cpu_kv_storage.h"
#include "kv/kv_cache_manager.h"
#include "model/ouro_core.h"

namespace rlt::engine {

class PagedAttention final : public model::CoreAttention {
 public:
  PagedAttention(kv::CpuKVStorage& storage, std::unique_ptr<attention::AttentionBackend> backend,
                 const attention::BackendCapabilities& caps, int32_t num_q_heads);

  // Plans the passes over `rows`. With `depths` empty, one pass in which each row reads and
  // writes the plane of its own depth (a recurrent batch at mixed depths). Otherwise one pass per
  // entry of `depths` over the same rows (a prefill chunk through every loop): lengths and
  // grouping are planned once and shared; select one with use_depth(). Packed grouping is used
  // when `packed` and the backend declares packed_prefill.
  Status plan(std::span<const attention::PlannedRow> rows, std::span<const int32_t> depths,
              const kv::KVCacheManager& kv, bool packed);
  // Selects which of the planned depths the next pass runs (index into `depths`).
  void use_depth(size_t index) { depth_index_ = index; }

  void attend(int64_t layer, const float* q, const float* k, const float* v, int64_t rows,
              float* out) override;
  // The first error an attend() call hit in this pass (attend cannot return one).
  const Status& status() const { return status_; }

  bool supports_packed() const { return caps_.packed_prefill; }

 private:
  kv::CpuKVStorage& storage_;
  std::unique_ptr<attention::AttentionBackend> backend_;
  attention::BackendCapabilities caps_;
  int32_t num_q_heads_;
  attention::PlanStaging staging_;
  PassWrites writes_;
  size_t depth_index_ = 0;
  Status status_;
};

}  // namespace rlt::engine
