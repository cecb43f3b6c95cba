// The model on the GPU (CUDA builds): weights uploaded once from the checkpoint (linear weights in
// their stored dtype, row-major [out, in], q/k/v and gate/up each fused into one matrix), and the
// stages of model::OuroCore over device buffers — the same per-loop norm, sandwich norms and exit
// gate. Attention is delegated (GpuCoreAttention), as on the CPU.
#pragma once

#include <memory>
#include <vector>

#include "cuda/linear.h"
#include "cuda/model_kernels.h"
#include "cuda/runtime.h"
#include "model/loop_program.h"
#include "model/ouro_weights.h"

namespace rlt::runner {

// Supplies attention for one pass of the GPU core. qkv: [rows, q_dim + 2·kv_dim] straight from
// the fused projection (before RoPE); the callee applies RoPE, stores K/V for `layer` and writes
// out: [rows, q_dim]. `q` is scratch of [rows, q_dim] for the rotated queries.
class GpuCoreAttention {
 public:
  virtual ~GpuCoreAttention() = default;
  virtual Status attend(int64_t layer, const float* qkv, int64_t rows, float* q, float* out) = 0;
};

struct GpuLayer {
  cuda::DeviceMatrix qkv, o_proj, gate_up, down_proj;
  cuda::DeviceAllocation norms;  // f32 [4, hidden]: input, attn_out, post_attn, mlp_out
};

class GpuCore {
 public:
  // Uploads the weights of `model` (which must outlive the core). Errors: not enough device
  // memory (with sizes), fused tensors stored in different dtypes.
  static Result<std::unique_ptr<GpuCore>> create(const model::OuroModel& model,
                                                 cuda::StreamHandle stream);

  const io::ModelConfig& config() const { return model_.config; }
  cuda::StreamHandle stream() const { return stream_; }
  const float* inv_freq() const { return static_cast<const float*>(inv_freq_.data()); }
  size_t weight_bytes() const { return weight_bytes_; }

  // Sizes every activation buffer for `rows` rows (call before capturing graphs).
  Status reserve(int64_t rows);
  // h[rows, hidden] = embedding rows of tokens (device int32).
  Status embed(const int32_t* tokens, int64_t rows, float* h);
  // One loop in place on h (device): the model's loop program with the GPU's fusions for this
  // pass's shape (planned once per shape); gate logits to gate_logits[rows] (device) when not null.
  Status run_loop(float* h, int64_t rows, GpuCoreAttention& attention, float* gate_logits);
  // logits[rows, vocab] = h · lm_headᵀ (device).
  Status lm_head(const float* h, int64_t rows, float* logits);

 private:
  class Executor;
  GpuCore(const model::OuroModel& model, cuda::StreamHandle stream)
      : model_(model), stream_(stream) {}
  Status upload(const io::ModelConfig& c);
  const model::LoopProgram& plan(bool gemv_fusions);

  const model::OuroModel& model_;
  cuda::StreamHandle stream_;
  std::unique_ptr<cuda::LinearRunner> linear_;
  std::vector<GpuLayer> layers_;
  cuda::DeviceMatrix embed_, lm_head_;
  cuda::DeviceAllocation final_norm_, gate_weight_, inv_freq_;
  cuda::DeviceAllocation done_blocks_;  // the fused residual-norm GEMV's counter (zeroed)
  size_t weight_bytes_ = 0;
  // Every projection of the core has one element type (then producers may write GEMM inputs
  // directly in it).
  bool uniform_weight_type_ = true;
  int64_t capacity_rows_ = 0;
  cuda::DeviceAllocation normed_, qkv_, q_, attn_, proj_, gate_up_, act_;
  model::LoopProgram plan_, gemv_plan_;
};

}  // namespace rlt::runner
