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

enum class LoopOpKind : uint8_t {
  kNorm,      // normed = rms_norm(h, norm of `layer`)
  kProject,   // `proj` of `layer` (kGateUp includes the SwiGLU)
  kAttend,    // attention of `layer`
  kResidual,  // h += rms_norm(proj, `norm`) (kNone: h += proj)
  kLoopNorm,  // h = rms_norm(h, final)
  kGate,      // gate logits of h
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
};

using LoopProgram = std::vector<LoopOp>;

// The unfused program of one loop of `config`'s core, gate included (executors skip kGate when
// the caller wants no gate logits).
LoopProgram core_loop_program(const io::ModelConfig& config);

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
