// The Ouro forward math as stages shared by every executor (the dense reference model, the
// batched engine): embed (prelude), one loop of the shared core (L sandwich-norm layers, the loop
// norm, the exit gate), and the lm head (coda). A plain Llama checkpoint is the one-loop case:
// pre-norm layers, the final norm as the "loop norm", no gate. Attention is delegated, so how K/V are stored
// (dense per (loop, layer), or paged per depth plane) is the caller's business.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/ops.h"
#include "model/loop_program.h"
#include "model/ouro_weights.h"

namespace rlt::model {

// Supplies attention for one pass of the core over a set of rows.
class CoreAttention {
 public:
  virtual ~CoreAttention() = default;
  // Called once per layer (`layer`: model::attention_layer — the core's, then Huginn's prelude
  // and coda blocks, whose K/V do not depend on the loop). q: [rows, num_heads·head_dim] with RoPE applied; k, v:
  // [rows, num_kv_heads·head_dim] (k with RoPE). The callee stores k and v as the rows' K/V for
  // this layer (at the depth it is serving) and writes out: [rows, num_heads·head_dim].
  virtual void attend(int64_t layer, const float* q, const float* k, const float* v, int64_t rows,
                      float* out) = 0;
};

// Reusable buffers for a core pass; grows to the largest batch seen and then allocates nothing.
struct CoreScratch {
  std::vector<float> normed, qkv, q, k, v, attn, proj, act;
  std::vector<float> rope_angles;  // [row][cos head_dim / 2, sin head_dim / 2] of one pass
  std::vector<float> concat, readout;  // Huginn: the adapter's input; the readout's state
  void ensure(const io::ModelConfig& c, int64_t rows);
};

class OuroCore {
 public:
  explicit OuroCore(const OuroModel& model);

  const io::ModelConfig& config() const { return model_.config; }

  // Prelude: h[rows, hidden] = embedding rows of `tokens` (times Huginn's embedding scale).
  void embed(const int32_t* tokens, int64_t rows, float* h) const;
  // Huginn's prelude blocks, in place on the embedded h[rows, hidden]: their output is the
  // injection every step reads. Nothing for other models.
  void run_prelude(float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                   CoreScratch& scratch) const;

  // One loop of the core, in place on h[rows, hidden]: the model's loop program
  // (model/loop_program.h) on the CPU kernels — every layer, then model.norm. Writes the exit
  // gate's logit of each row to gate_logits[rows] when it is not null (-inf for a model without
  // a gate: it never exits early).
  // `injection`: Huginn's prelude output [rows, hidden], which the adapter reads.
  void run_loop(float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                CoreScratch& scratch, float* gate_logits, const float* injection = nullptr) const;

  // The lm head's input for states h[rows, hidden] (h is not changed): Huginn's readout (ln_f,
  // the coda blocks with their attention, ln_f) into scratch.readout; h itself for other models
  // (the loop norm already ran).
  const float* readout(const float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                       CoreScratch& scratch) const;
  // Whether readout() attends (Huginn's coda): it then writes the coda's K/V of the rows.
  bool readout_attends() const { return !readout_program_.empty(); }

  // Coda: logits[rows, vocab] = h · lm_headᵀ.
  void lm_head(const float* h, int64_t rows, float* logits) const;

  // Exit gate logit of one hidden row: h · w + b.
  float gate_logit(const float* h) const;

 private:
  const OuroModel& model_;
  kernels::Rope rope_;
  LoopProgram program_;
  LoopProgram prelude_program_;
  LoopProgram readout_program_;
};

}  // namespace rlt::model
