// The model's attention over the paged KV cache: a model::CoreAttention that writes each row's
// K/V into its depth plane's page slot and runs the selected backend with the pass's metadata
// (planned once per pass by the engine, runner/model_input.h, and bound to every layer's call).
// Layers past the core's (Huginn's prelude and coda: model::outer_kv_slot) use the pass's outer
// planes instead, whatever the loop.
#pragma once

#include <memory>
#include <vector>

#include "attention/backend.h"
#include "kv/cpu_kv_storage.h"
#include "model/ouro_core.h"
#include "runner/model_input.h"

namespace rlt::runner {

class PagedAttention final : public model::CoreAttention {
 public:
  // `outer_planes`: the model's outer K/V planes (model::outer_kv_planes; 0 for most models).
  PagedAttention(kv::CpuKVStorage& storage, std::unique_ptr<attention::AttentionBackend> backend,
                 int32_t num_q_heads, int32_t outer_planes = 0);

  // Binds `pass` (which must outlive the calls that follow) for the next attend() calls, at its
  // first planned depth, after checking its metadata and write targets once.
  Status bind(const PassInput& pass);
  // Selects which of the pass's planned depths the next loop runs (index into pass.depths).
  void use_depth(size_t index) { depth_index_ = index; }

  void attend(int64_t layer, const float* q, const float* k, const float* v, int64_t rows,
              float* out) override;
  // The first error an attend() call hit in this pass (attend cannot return one).
  const Status& status() const { return status_; }
  // Wall time spent in attend() so far.
  double seconds() const { return seconds_; }

 private:
  attention::AttentionParams layer_params(int32_t layer, const attention::AttentionPlan& plan,
                                          size_t table_set) const;

  kv::CpuKVStorage& storage_;
  std::unique_ptr<attention::AttentionBackend> backend_;
  int32_t num_q_heads_;
  int32_t outer_planes_;
  const PassInput* pass_ = nullptr;
  size_t depth_index_ = 0;
  Status status_;
  double seconds_ = 0.0;
};

}  // namespace rlt::runner
