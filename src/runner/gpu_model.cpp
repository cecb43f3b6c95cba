#include "runner/gpu_model.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "cuda/device.h"
#include "cuda/element_type.h"
#include "cuda/gemv_bf16.h"
#include "model/rope_scaling.h"

namespace rlt::runner {
namespace {

Status copy_to_device(void* dst, const void* src, size_t bytes, cuda::StreamHandle stream) {
  // The source is the checkpoint's file mapping (pageable): the copy completes before return.
  RLT_RETURN_IF_ERROR(cuda::cuda_status(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "uploading weights"));
  return cuda::cuda_status(cudaStreamSynchronize(stream), "uploading weights");
}

// Stacks the named [rows_i, cols] tensors (one dtype) into one device matrix.
Result<cuda::DeviceMatrix> stacked(const io::Checkpoint& ckpt,
                                   const std::vector<std::string>& names,
                                   cuda::StreamHandle stream) {
  cuda::DeviceMatrix m;
  std::vector<const io::TensorView*> views;
  for (const std::string& n : names) {
    const io::TensorView* t = ckpt.find(n);
    if (!t || t->shape.size() != 2) return not_found(fmt::format("tensor {} (2-D) is missing", n));
    if (!views.empty() &&
        (t->dtype != views.front()->dtype || t->shape[1] != views.front()->shape[1])) {
      return invalid_argument(fmt::format(
          "{} and {} are fused on the GPU but differ in dtype or width", names.front(), n));
    }
    views.push_back(t);
    m.rows += t->shape[0];
  }
  m.cols = views.front()->shape[1];
  RLT_ASSIGN_OR_RETURN(m.type, cuda::element_type_of(views.front()->dtype, names.front()));
  RLT_ASSIGN_OR_RETURN(cuda::DeviceAllocation a,
                       cuda::DeviceAllocation::allocate(m.bytes(), names.front()));
  m.storage = std::make_shared<cuda::DeviceAllocation>(std::move(a));
  size_t offset = 0;
  for (const io::TensorView* t : views) {
    RLT_RETURN_IF_ERROR(copy_to_device(static_cast<std::byte*>(m.storage->data()) + offset, t->data,
                                       t->nbytes, stream));
    offset += t->nbytes;
  }
  return m;
}

Result<cuda::DeviceAllocation> f32_vectors(const std::vector<const std::vector<float>*>& parts,
                                           const char* what, cuda::StreamHandle stream) {
  size_t n = 0;
  for (const auto* p : parts) n += p->size();
  RLT_ASSIGN_OR_RETURN(cuda::DeviceAllocation a,
                       cuda::DeviceAllocation::allocate(n * sizeof(float), what));
  size_t offset = 0;
  for (const auto* p : parts) {
    RLT_RETURN_IF_ERROR(copy_to_device(static_cast<float*>(a.data()) + offset, p->data(),
                                       p->size() * sizeof(float), stream));
    offset += p->size();
  }
  return a;
}

std::string layer_name(int64_t i, const char* suffix) {
  return fmt::format("model.layers.{}.{}", i, suffix);
}

Status grow(cuda::DeviceAllocation& buffer, int64_t floats, const char* what) {
  const auto bytes = static_cast<size_t>(floats) * sizeof(float);
  if (buffer.bytes() >= bytes) return {};
  buffer = cuda::DeviceAllocation();
  RLT_ASSIGN_OR_RETURN(buffer, cuda::DeviceAllocation::allocate(bytes, what));
  return {};
}

float* f(cuda::DeviceAllocation& a) {
  return static_cast<float*>(a.data());
}

}  // namespace

Result<std::unique_ptr<GpuCore>> GpuCore::create(const model::OuroModel& model,
                                                 cuda::StreamHandle stream) {
  std::unique_ptr<GpuCore> core(new GpuCore(model, stream));
  RLT_ASSIGN_OR_RETURN(core->linear_, cuda::LinearRunner::create(stream));
  RLT_RETURN_IF_ERROR(core->upload(model.config));
  return core;
}

Status GpuCore::upload(const io::ModelConfig& c) {
  const io::Checkpoint& ckpt = model_.checkpoint;
  const model::OuroWeights& w = model_.weights;
  RLT_ASSIGN_OR_RETURN(embed_, stacked(ckpt, {"model.embed_tokens.weight"}, stream_));
  if (c.tie_word_embeddings) {
    lm_head_ = embed_;  // shares the bytes
  } else {
    RLT_ASSIGN_OR_RETURN(lm_head_, stacked(ckpt, {"lm_head.weight"}, stream_));
    weight_bytes_ += lm_head_.bytes();
  }
  weight_bytes_ += embed_.bytes();
  RLT_ASSIGN_OR_RETURN(final_norm_, f32_vectors({&w.final_norm}, "model.norm", stream_));
  if (c.has_exit_gate()) {
    RLT_ASSIGN_OR_RETURN(gate_weight_, f32_vectors({&w.exit_gate_weight}, "exit gate", stream_));
  }
  RLT_ASSIGN_OR_RETURN(done_blocks_,
                       cuda::DeviceAllocation::allocate(sizeof(unsigned), "fused norm counter"));
  RLT_RETURN_IF_ERROR(cuda::cuda_status(
      cudaMemsetAsync(done_blocks_.data(), 0, sizeof(unsigned), stream_), "fused norm counter"));
  const std::vector<float> inv_freq = model::rope_inv_freq(c);
  RLT_ASSIGN_OR_RETURN(inv_freq_, f32_vectors({&inv_freq}, "rope frequencies", stream_));
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    GpuLayer& l = layers_[static_cast<size_t>(i)];
    const model::OuroLayerWeights& lw = w.layers[static_cast<size_t>(i)];
    RLT_ASSIGN_OR_RETURN(l.qkv, stacked(ckpt,
                                        {layer_name(i, "self_attn.q_proj.weight"),
                                         layer_name(i, "self_attn.k_proj.weight"),
                                         layer_name(i, "self_attn.v_proj.weight")},
                                        stream_));
    RLT_ASSIGN_OR_RETURN(l.o_proj,
                         stacked(ckpt, {layer_name(i, "self_attn.o_proj.weight")}, stream_));
    RLT_ASSIGN_OR_RETURN(
        l.gate_up,
        stacked(ckpt, {layer_name(i, "mlp.gate_proj.weight"), layer_name(i, "mlp.up_proj.weight")},
                stream_));
    RLT_ASSIGN_OR_RETURN(l.down_proj,
                         stacked(ckpt, {layer_name(i, "mlp.down_proj.weight")}, stream_));
    // Layers without sandwich norms (Llama) upload the two they have; the others are unused.
    const std::vector<float>& attn_out = c.sandwich_norms() ? lw.attn_out_norm : lw.input_norm;
    const std::vector<float>& mlp_out = c.sandwich_norms() ? lw.mlp_out_norm : lw.post_attn_norm;
    RLT_ASSIGN_OR_RETURN(l.norms,
                         f32_vectors({&lw.input_norm, &attn_out, &lw.post_attn_norm, &mlp_out},
                                     "layer norms", stream_));
    weight_bytes_ += l.qkv.bytes() + l.o_proj.bytes() + l.gate_up.bytes() + l.down_proj.bytes();
    for (const cuda::DeviceMatrix* m : {&l.qkv, &l.o_proj, &l.gate_up, &l.down_proj})
      uniform_weight_type_ &= m->type == layers_[0].qkv.type;
  }
  return {};
}

Status GpuCore::reserve(int64_t rows) {
  if (rows <= capacity_rows_) return {};
  const io::ModelConfig& c = model_.config;
  RLT_RETURN_IF_ERROR(grow(normed_, rows * c.hidden_size, "activations"));
  RLT_RETURN_IF_ERROR(grow(qkv_, rows * (c.q_dim() + 2 * c.kv_dim()), "activations"));
  RLT_RETURN_IF_ERROR(grow(q_, rows * c.q_dim(), "activations"));
  RLT_RETURN_IF_ERROR(grow(attn_, rows * c.q_dim(), "activations"));
  RLT_RETURN_IF_ERROR(grow(proj_, rows * c.hidden_size, "activations"));
  RLT_RETURN_IF_ERROR(grow(gate_up_, rows * 2 * c.intermediate_size, "activations"));
  RLT_RETURN_IF_ERROR(grow(act_, rows * c.intermediate_size, "activations"));
  // Every linear input: hidden (qkv, gate_up, lm head), q_dim (o_proj), intermediate (down).
  RLT_RETURN_IF_ERROR(
      linear_->reserve(rows, std::max({c.hidden_size, c.intermediate_size, c.q_dim()})));
  capacity_rows_ = rows;
  return {};
}

Status GpuCore::embed(const int32_t* tokens, int64_t rows, float* h) {
  return cuda::embed_rows(embed_.data(), embed_.type, model_.config.hidden_size, tokens, rows, h,
                          stream_);
}

// The loop program's ops on the GPU for one pass (rows and input rounding fixed for the pass).
class GpuCore::Executor final : public model::LoopExecutor {
 public:
  Executor(GpuCore& core, float* h, int64_t rows, GpuCoreAttention& attention, float* gate_logits,
           bool rounded)
      : core_(core),
        c_(core.model_.config),
        h_(h),
        rows_(rows),
        attention_(attention),
        gate_logits_(gate_logits),
        rounded_(rounded),
        input_type_(rounded ? core.layers_[0].qkv.type : cuda::ElementType::kF32),
        normed_(rounded ? core.linear_->input_scratch() : f(core.normed_)),
        act_(rounded ? core.linear_->input_scratch() : f(core.act_)),
        eps_(static_cast<float>(c_.rms_norm_eps)) {}

  Status execute(const model::LoopOp& op) override {
    const int64_t hidden = c_.hidden_size;
    cuda::StreamHandle stream = core_.stream_;
    switch (op.kind) {
      case model::LoopOpKind::kNorm:
        return cuda::rms_norm_to(h_, norm(op.norm, op.layer), rows_, hidden, eps_, normed_,
                                 input_type_, stream);
      case model::LoopOpKind::kProject:
        return project(op.proj, op.layer);
      case model::LoopOpKind::kAttend:
        return attention_.attend(op.layer, f(core_.qkv_), rows_, f(core_.q_), f(core_.attn_));
      case model::LoopOpKind::kResidual:
        if (op.norm == model::NormWeight::kNone)
          return cuda::add_in_place(h_, f(core_.proj_), rows_ * hidden, stream);
        return cuda::add_rms_norm(h_, f(core_.proj_), norm(op.norm, op.layer), rows_, hidden, eps_,
                                  stream);
      case model::LoopOpKind::kLoopNorm:
        return cuda::rms_norm(h_, norm(model::NormWeight::kFinal, 0), rows_, hidden, eps_, h_,
                              stream);
      case model::LoopOpKind::kResidualNorm: {
        // The norm opening the next sublayer writes the next GEMM's input; the loop norm
        // replaces h (the next loop's input and the lm head's input).
        const bool loop_end = op.next_norm == model::NormWeight::kFinal;
        void* y = loop_end ? static_cast<void*>(h_) : normed_;
        const cuda::ElementType y_type = loop_end ? cuda::ElementType::kF32 : input_type_;
        const float* next = norm(op.next_norm, op.next_layer);
        if (op.norm != model::NormWeight::kNone) {
          return cuda::add_rms_norm_then_norm(h_, f(core_.proj_), norm(op.norm, op.layer), next,
                                              rows_, hidden, eps_, y, y_type, stream);
        }
        RLT_RETURN_IF_ERROR(cuda::add_in_place(h_, f(core_.proj_), rows_ * hidden, stream));
        return cuda::rms_norm_to(h_, next, rows_, hidden, eps_, y, y_type, stream);
      }
      case model::LoopOpKind::kResidualNormProject: {
        const cuda::ResidualNorm fused{h_,
                                       f(core_.proj_),
                                       norm(op.norm, op.layer),
                                       norm(op.next_norm, op.next_layer),
                                       eps_,
                                       static_cast<unsigned*>(core_.done_blocks_.data())};
        const GpuLayer& w = core_.layers_[static_cast<size_t>(op.next_layer)];
        if (op.proj == model::Projection::kQkv) {
          return cuda::gemv_bf16_residual_norm(static_cast<const uint16_t*>(w.qkv.data()),
                                               w.qkv.rows, w.qkv.cols, fused, f(core_.qkv_),
                                               stream);
        }
        if (op.proj == model::Projection::kGateUp) {
          return cuda::gemv_bf16_residual_norm_swiglu(
              static_cast<const uint16_t*>(w.gate_up.data()), w.gate_up.rows / 2, w.gate_up.cols,
              fused, static_cast<float*>(act_), stream);
        }
        return internal_error(
            "a fused residual-norm GEMV feeds the qkv or the gate/up projection only");
      }
      case model::LoopOpKind::kGate:
        if (!c_.has_exit_gate()) {
          // Never acted on: the engine runs a gate-less model's tokens to max_loops (threshold 1).
          return cuda::cuda_status(
              cudaMemsetAsync(gate_logits_, 0, static_cast<size_t>(rows_) * sizeof(float), stream),
              "exit gate");
        }
        return cuda::gate_logits(h_, f(core_.gate_weight_), core_.model_.weights.exit_gate_bias,
                                 rows_, hidden, gate_logits_, stream);
      case model::LoopOpKind::kSumNorm:
      case model::LoopOpKind::kAdapter:
        // Huginn's ops: its model capabilities keep it off the GPU (model_capabilities.h).
        return unimplemented("the GPU runner has no Huginn ops (sum-norm residuals, the adapter)");
    }
    return internal_error("unknown loop op");
  }

 private:
  const float* norm(model::NormWeight which, int32_t layer) const {
    if (which == model::NormWeight::kFinal)
      return static_cast<const float*>(core_.final_norm_.data());
    // Per layer, f32 [4, hidden]: input, attn_out, post_attn, mlp_out.
    const auto* norms =
        static_cast<const float*>(core_.layers_[static_cast<size_t>(layer)].norms.data());
    const int64_t hidden = c_.hidden_size;
    switch (which) {
      case model::NormWeight::kInput:
        return norms;
      case model::NormWeight::kAttnOut:
        return norms + hidden;
      case model::NormWeight::kPostAttn:
        return norms + 2 * hidden;
      case model::NormWeight::kMlpOut:
        return norms + 3 * hidden;
      default:
        return nullptr;
    }
  }

  // A projection whose input a norm or the SwiGLU wrote (rounded to the weight type when the
  // GEMMs round their input, else f32).
  Status project_rounded(const cuda::DeviceMatrix& w, const void* x, float* y) {
    if (rounded_) return core_.linear_->run_rounded(w, rows_, y);
    return core_.linear_->run(w, static_cast<const float*>(x), rows_, y);
  }

  Status project(model::Projection which, int32_t layer) {
    const GpuLayer& w = core_.layers_[static_cast<size_t>(layer)];
    switch (which) {
      case model::Projection::kQkv:
        return project_rounded(w.qkv, normed_, f(core_.qkv_));
      case model::Projection::kOProj:  // the attention output is f32
        return core_.linear_->run(w.o_proj, f(core_.attn_), rows_, f(core_.proj_));
      case model::Projection::kGateUp:
        if (core_.linear_->uses_gemv(w.gate_up, rows_)) {
          // One decode row: the GEMV applies the SwiGLU itself. Its input and output are f32 here
          // (a GEMV never takes rounded input, so `rounded` is false).
          return cuda::gemv_bf16_swiglu(
              static_cast<const uint16_t*>(w.gate_up.data()), static_cast<const float*>(normed_),
              static_cast<float*>(act_), w.gate_up.rows / 2, w.gate_up.cols, core_.stream_);
        }
        RLT_RETURN_IF_ERROR(project_rounded(w.gate_up, normed_, f(core_.gate_up_)));
        return cuda::silu_mul(f(core_.gate_up_), rows_, c_.intermediate_size, act_, input_type_,
                              core_.stream_);
      case model::Projection::kDown:
        return project_rounded(w.down_proj, act_, f(core_.proj_));
    }
    return internal_error("unknown projection");
  }

  GpuCore& core_;
  const io::ModelConfig& c_;
  float* h_;
  int64_t rows_;
  GpuCoreAttention& attention_;
  float* gate_logits_;
  bool rounded_;
  cuda::ElementType input_type_;
  void* normed_;
  void* act_;
  float eps_;
};

const model::LoopProgram& GpuCore::plan(bool gemv_fusions) {
  // Two plans, each made once: every residual fused with the norm after it, and for one bf16
  // decode row of a sandwich-norm model those fused into the next GEMV as well.
  model::LoopProgram& p = gemv_fusions ? gemv_plan_ : plan_;
  if (p.empty()) {
    p = model::fuse_residual_norms(model::core_loop_program(model_.config));
    if (gemv_fusions) p = model::fuse_residual_norm_projections(p);
  }
  return p;
}

Status GpuCore::run_loop(float* h, int64_t rows, GpuCoreAttention& attention, float* gate_logits) {
  const io::ModelConfig& c = model_.config;
  RLT_RETURN_IF_ERROR(reserve(rows));
  // Inputs of the q/k/v, gate/up and down projections: when the linear layers round their input
  // to the 16-bit weight type (GEMMs), their producers (the norms, SwiGLU) store it rounded
  // straight into the GEMM input scratch, saving a conversion kernel per projection; otherwise
  // (f32 weights, bf16 GEMV rows) they write f32.
  const bool rounded = linear_->rounds_input(layers_[0].qkv, rows) && uniform_weight_type_;
  const bool gemv_fusions = c.sandwich_norms() && uniform_weight_type_ &&
                            linear_->uses_gemv(layers_[0].qkv, rows) &&
                            cuda::gemv_residual_norm_supported(c.hidden_size);
  Executor executor(*this, h, rows, attention, gate_logits, rounded);
  return model::run_loop_program(plan(gemv_fusions), executor, gate_logits != nullptr);
}

Status GpuCore::lm_head(const float* h, int64_t rows, float* logits) {
  return linear_->run(lm_head_, h, rows, logits);
}

}  // namespace rlt::runner
