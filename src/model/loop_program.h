// One loop of the shared core written once, as data: the sequence of operations every executor
// (the CPU kernels, the GPU) runs for a set of rows. The model description says which ops a
// loop has (pre-norm Llama layers or Ouro's sandwich norms, the loop norm, the exit gate); a
// device may rewrite the sequence once per (rows, dtype) into fused ops it implements
// (fuse_residual_norms, and the GPU runner's own GEMV fusions), instead of branching inside the
// loop. run_loop_program is the only loop over layers.
//
//   per layer l:  Norm(input)        normed  = rms_norm(h)
//                 Project(qkv)       qkv     = normed · W_qkvᵀ
//                 Attend             attn    = attention(RoPE(q), RoPE(k), v); K/V stored for l
//                 Project(o_proj)    proj    = attn · W_oᵀ
//                 Residual(attn_out) h      += rms_norm(proj)   (Ouro; Llama: h += proj)
//                 Norm(post_attn)    normed  = rms_norm(h)
//                 Project(gate_up)   act     = SwiGLU(normed · W_gate_upᵀ)
//                 Project(down)      proj    = act · W_downᵀ
//                 Residual(mlp_out)  h      += rms_norm(proj)   (Llama: h += proj)
//   then          LoopNorm(final)    h       = rms_norm(h)  (the next loop's and the lm head's
//   input)
//                 Gate               gate    = h · w + b     (when the caller asks for gate logits)
//
// Huginn (docs/models.md) writes its blocks with SumNorm (h = rms_norm(h + proj): the norm on
// the residual sum) in place of Residual, starts each step with Adapter (h = A · concat[h, e],
// e the prelude's output), and has two more programs around the recurrence: the prelude's blocks
// and the readout (LoopNorm, the coda's blocks, LoopNorm). Blocks outside the recurrence are the
// `kPrelude` and `kCoda` layer groups; their K/V do not depend on the loop depth.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "rlt/status.h"

namespace rlt::model {

enum class NormWeight : uint8_t { kNone, kInput, kAttnOut, kPostAttn, kMlpOut, kFinal };
enum class Projection : uint8_t { kQkv, kOProj, kGateUp, kDown };
// Which blocks `layer` indexes: the recurrent core's, or Huginn's prelude or coda.
enum class LayerGroup : uint8_t { kCore, kPrelude, kCoda };

enum class LoopOpKind : uint8_t {
  kNorm,      // normed = rms_norm(h, norm of `layer`)
  kProject,   // `proj` of `layer` (kGateUp includes the SwiGLU)
  kAttend,    // attention of `layer`
  kResidual,  // h += rms_norm(proj, `norm`) (kNone: h += proj)
  kLoopNorm,  // h = rms_norm(h, final)
  kGate,      // gate logits of h
  kSumNorm,   // h = rms_norm(h + proj, `norm` of `layer`) (Huginn)
  kAdapter,   // h = adapter · concat[h, injection] (Huginn: the prelude's output)
  // Fused ops (a device's plan only):
  // kResidual(`norm`) then kNorm / kLoopNorm (`next_norm` of `next_layer`) in one kernel.
  kResidualNorm,
  // kResidualNorm (whose output feeds it) then kProject(`proj` of `next_layer`) in one kernel.
  kResidualNormProject,
};

struct LoopOp {
  LoopOpKind kind = LoopOpKind::kNorm;
  int32_t layer = 0;
  NormWeight norm = NormWeight::kNone;
  Projection proj = Projection::kQkv;
  // kResidualNorm, kResidualNormProject: the norm that follows the residual, and its layer.
  NormWeight next_norm = NormWeight::kNone;
  int32_t next_layer = 0;
  LayerGroup group = LayerGroup::kCore;
};

using LoopProgram = std::vector<LoopOp>;

// The unfused program of one loop of `config`'s core, gate included (executors skip kGate when
// the caller wants no gate logits).
LoopProgram core_loop_program(const io::ModelConfig& config);
// The blocks that run once per token before the recurrence (Huginn's prelude; empty otherwise).
LoopProgram prelude_program(const io::ModelConfig& config);
// What turns the last state into the lm head's input (Huginn: ln_f, the coda, ln_f; empty
// otherwise: the loop norm already did).
LoopProgram readout_program(const io::ModelConfig& config);

// The index attention receives for `layer` of `group`: core layers 0..L-1, then the prelude's,
// then the coda's (CoreAttention::attend).
int64_t attention_layer(const io::ModelConfig& config, LayerGroup group, int32_t layer);

// Paged K/V of the blocks outside the recurrence (Huginn): packed num_layers to a plane after the
// loop planes (kv::KVCacheConfig::outer_planes), the prelude's first.
int32_t outer_kv_planes(const io::ModelConfig& config);
struct OuterKvSlot {
  int32_t plane = 0;  // outer plane index, [0, outer_kv_planes)
  int32_t layer = 0;  // layer within the plane
};
// Where attention layer `layer` (>= core_layers, the config's num_layers) keeps its K/V.
OuterKvSlot outer_kv_slot(int64_t core_layers, int64_t layer);

// Every kResidual followed by a kNorm or kLoopNorm becomes one kResidualNorm.
LoopProgram fuse_residual_norms(const LoopProgram& program);
// Every kResidualNorm whose norm feeds the next op's projection (not the loop norm) becomes one
// kResidualNormProject (the GPU's single-row GEMVs recompute the norm in each block).
LoopProgram fuse_residual_norm_projections(const LoopProgram& program);

// "norm(input, 0); project(qkv, 0); ..." — for tests and logs.
std::string describe(const LoopProgram& program);

// What a device implements: one op over the rows of the current pass.
class LoopExecutor {
 public:
  virtual ~LoopExecutor() = default;
  virtual Status execute(const LoopOp& op) = 0;
};

// Runs `program` in order on `executor` (skipping kGate unless `gate`); stops at the first error.
Status run_loop_program(std::span<const LoopOp> program, LoopExecutor& executor, bool gate);

}  // namespace rlt::model
