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

Status GpuCore::run_loop(float* h, int64_t rows, GpuCoreAttention& attention, float* gate_logits) {
  const io::ModelConfig& c = model_.config;
  RLT_RETURN_IF_ERROR(reserve(rows));
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t hidden = c.hidden_size;
  // Inputs of the q/k/v, gate/up and down projections: when the linear layers round their input
  // to the 16-bit weight type (GEMMs), their producers (the norms, SwiGLU) store it rounded
  // straight into the GEMM input scratch, saving a conversion kernel per projection; otherwise
  // (f32 weights, bf16 GEMV rows) they write f32.
  const bool rounded = linear_->rounds_input(layers_[0].qkv, rows) && uniform_weight_type_;
  const cuda::ElementType input_type = rounded ? layers_[0].qkv.type : cuda::ElementType::kF32;
  void* normed = rounded ? linear_->input_scratch() : f(normed_);
  void* act = rounded ? linear_->input_scratch() : f(act_);
  auto project = [&](const cuda::DeviceMatrix& w, const void* x, float* y) -> Status {
    if (rounded) return linear_->run_rounded(w, rows, y);
    return linear_->run(w, static_cast<const float*>(x), rows, y);
  };
  // A residual closes each sublayer and a norm opens the next (or ends the loop): for sandwich
  // models one fused kernel does both; the norm that opens the first layer runs on its own.
  auto residual_then_norm = [&](const float* out_norm, const float* next_norm, void* y,
                                cuda::ElementType y_type) -> Status {
    if (c.sandwich_norms()) {
      return cuda::add_rms_norm_then_norm(h, f(proj_), out_norm, next_norm, rows, hidden, eps, y,
                                          y_type, stream_);
    }
    RLT_RETURN_IF_ERROR(cuda::add_in_place(h, f(proj_), rows * hidden, stream_));
    return cuda::rms_norm_to(h, next_norm, rows, hidden, eps, y, y_type, stream_);
  };
  // One decode row of a sandwich-norm model with bf16 weights: each sublayer's residual and the
  // next norm run inside the next sublayer's first GEMV (bit-identical, two launches fewer per
  // layer); the norm that opens the first layer and the loop norm still run on their own.
  const bool fused_norms = c.sandwich_norms() && uniform_weight_type_ &&
                           linear_->uses_gemv(layers_[0].qkv, rows) &&
                           cuda::gemv_residual_norm_supported(hidden);
  auto fused = [&](const float* out_norm, const float* next_norm) {
    return cuda::ResidualNorm{h,         f(proj_), out_norm,
                              next_norm, eps,      static_cast<unsigned*>(done_blocks_.data())};
  };
  const float* pending_out_norm = nullptr;  // a residual the next qkv GEMV applies
  RLT_RETURN_IF_ERROR(cuda::rms_norm_to(h, static_cast<const float*>(layers_[0].norms.data()), rows,
                                        hidden, eps, normed, input_type, stream_));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const GpuLayer& w = layers_[static_cast<size_t>(l)];
    const float* norms = static_cast<const float*>(w.norms.data());
    const auto* qkv_w = static_cast<const uint16_t*>(w.qkv.data());
    const auto* gate_up_w = static_cast<const uint16_t*>(w.gate_up.data());
    if (pending_out_norm != nullptr) {
      RLT_RETURN_IF_ERROR(cuda::gemv_bf16_residual_norm(
          qkv_w, w.qkv.rows, w.qkv.cols, fused(pending_out_norm, norms), f(qkv_), stream_));
      pending_out_norm = nullptr;
    } else {
      RLT_RETURN_IF_ERROR(project(w.qkv, normed, f(qkv_)));
    }
    RLT_RETURN_IF_ERROR(attention.attend(l, f(qkv_), rows, f(q_), f(attn_)));
    RLT_RETURN_IF_ERROR(linear_->run(w.o_proj, f(attn_), rows, f(proj_)));
    if (fused_norms) {
      RLT_RETURN_IF_ERROR(cuda::gemv_bf16_residual_norm_swiglu(
          gate_up_w, w.gate_up.rows / 2, w.gate_up.cols, fused(norms + hidden, norms + 2 * hidden),
          static_cast<float*>(act), stream_));
      RLT_RETURN_IF_ERROR(project(w.down_proj, act, f(proj_)));
      if (l + 1 < c.num_layers) {
        pending_out_norm = norms + 3 * hidden;
      } else {
        RLT_RETURN_IF_ERROR(
            residual_then_norm(norms + 3 * hidden, f(final_norm_), h, cuda::ElementType::kF32));
      }
      continue;
    }
    RLT_RETURN_IF_ERROR(residual_then_norm(norms + hidden, norms + 2 * hidden, normed, input_type));
    if (linear_->uses_gemv(w.gate_up, rows)) {
      // One decode row: the GEMV applies the SwiGLU itself. Its input and output are f32 here
      // (a GEMV never takes rounded input, so `rounded` is false).
      RLT_RETURN_IF_ERROR(cuda::gemv_bf16_swiglu(gate_up_w, static_cast<const float*>(normed),
                                                 static_cast<float*>(act), w.gate_up.rows / 2,
                                                 w.gate_up.cols, stream_));
    } else {
      RLT_RETURN_IF_ERROR(project(w.gate_up, normed, f(gate_up_)));
      RLT_RETURN_IF_ERROR(
          cuda::silu_mul(f(gate_up_), rows, c.intermediate_size, act, input_type, stream_));
    }
    RLT_RETURN_IF_ERROR(project(w.down_proj, act, f(proj_)));
    // The next layer's input norm, or after the last layer the loop norm, which replaces h: the
    // next loop's input and the lm head's input.
    if (l + 1 == c.num_layers) {
      RLT_RETURN_IF_ERROR(
          residual_then_norm(norms + 3 * hidden, f(final_norm_), h, cuda::ElementType::kF32));
    } else {
      const auto* next =
          static_cast<const float*>(layers_[static_cast<size_t>(l + 1)].norms.data());
      RLT_RETURN_IF_ERROR(residual_then_norm(norms + 3 * hidden, next, normed, input_type));
    }
  }
  if (gate_logits == nullptr) return {};
  if (!c.has_exit_gate()) {
    // Never acted on: the engine runs a gate-less model's tokens to max_loops (threshold 1).
    return cuda::cuda_status(
        cudaMemsetAsync(gate_logits, 0, static_cast<size_t>(rows) * sizeof(float), stream_),
        "exit gate");
  }
  return cuda::gate_logits(h, f(gate_weight_), model_.weights.exit_gate_bias, rows, hidden,
                           gate_logits, stream_);
}

Status GpuCore::lm_head(const float* h, int64_t rows, float* logits) {
  return linear_->run(lm_head_, h, rows, logits);
}

}  // namespace rlt::runner
