#include "model/ouro_core.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel_rows.h"
#include "model/rope_scaling.h"

namespace rlt::model {

void CoreScratch::ensure(const io::ModelConfig& c, int64_t rows) {
  auto fit = [](std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  };
  fit(normed, rows * c.hidden_size);
  fit(qkv, rows * (c.q_dim() + 2 * c.kv_dim()));
  fit(q, rows * c.q_dim());
  fit(k, rows * c.kv_dim());
  fit(v, rows * c.kv_dim());
  fit(attn, rows * c.q_dim());
  fit(proj, rows * c.hidden_size);
  fit(act, rows * c.intermediate_size);
  if (c.recurrent_injection()) {
    fit(concat, rows * 2 * c.hidden_size);
    fit(readout, rows * c.hidden_size);
  }
}

OuroCore::OuroCore(const OuroModel& model)
    : model_(model),
      rope_(rope_inv_freq(model.config)),
      program_(core_loop_program(model.config)),
      prelude_program_(prelude_program(model.config)),
      readout_program_(readout_program(model.config)) {}

void OuroCore::embed(const int32_t* tokens, int64_t rows, float* h) const {
  const int64_t hidden = model_.config.hidden_size;
  const auto scale = static_cast<float>(model_.config.embedding_scale);
  kernels::parallel_rows(rows, hidden, [&](int64_t r) {
    float* row = h + r * hidden;
    kernels::embedding_row(model_.weights.embed_tokens, tokens[r], row);
    if (scale != 1.0f)
      for (int64_t i = 0; i < hidden; ++i) row[i] *= scale;
  });
}

namespace {

// The loop program's ops on the CPU kernels. Its kernels fuse inside (gate/up with SwiGLU, the
// sandwich residual with its norm), so the CPU runs the unfused program.
class CpuLoopExecutor final : public LoopExecutor {
 public:
  CpuLoopExecutor(const OuroModel& model, const kernels::Rope& rope, float* h,
                  const int64_t* positions, int64_t rows, CoreAttention& attention,
                  CoreScratch& scratch, float* gate_logits, const OuroCore& core,
                  const float* injection)
      : model_(model),
        c_(model.config),
        rope_(rope),
        h_(h),
        positions_(positions),
        rows_(rows),
        attention_(attention),
        s_(scratch),
        gate_logits_(gate_logits),
        core_(core),
        injection_(injection) {
    // Every row's rotary cosines (then sines), once for all the layers of this pass.
    const int64_t d = rope_.head_dim();
    s_.rope_angles.resize(static_cast<size_t>(rows_ * d));
    // A sine and a cosine cost ~20 values' worth of per-row work each.
    kernels::parallel_rows(rows_, 20 * d, [&](int64_t r) {
      float* row = s_.rope_angles.data() + r * d;
      rope_.angles(positions_[r], row, row + d / 2);
    });
  }

  Status execute(const LoopOp& op) override {
    const float eps = static_cast<float>(c_.rms_norm_eps);
    const int64_t hidden = c_.hidden_size;
    switch (op.kind) {
      case LoopOpKind::kNorm:
        kernels::rms_norm(h_, norm(op, op.norm), rows_, hidden, eps, s_.normed.data());
        return {};
      case LoopOpKind::kProject:
        project(op);
        return {};
      case LoopOpKind::kAttend:
        attend(op);
        return {};
      case LoopOpKind::kResidual:
        // Ouro normalizes the sub-block output first (sandwich); Llama adds it as it is.
        if (op.norm == NormWeight::kNone) {
          kernels::add_in_place(h_, s_.proj.data(), rows_ * hidden);
        } else {
          kernels::add_rms_norm(h_, s_.proj.data(), norm(op, op.norm), rows_, hidden, eps);
        }
        return {};
      case LoopOpKind::kSumNorm:
        kernels::add_in_place(h_, s_.proj.data(), rows_ * hidden);
        kernels::rms_norm(h_, norm(op, op.norm), rows_, hidden, eps, h_);
        return {};
      case LoopOpKind::kAdapter:
        if (injection_ == nullptr) return internal_error("the adapter needs the prelude's output");
        for (int64_t r = 0; r < rows_; ++r) {
          float* dst = s_.concat.data() + r * 2 * hidden;
          std::copy(h_ + r * hidden, h_ + (r + 1) * hidden, dst);
          std::copy(injection_ + r * hidden, injection_ + (r + 1) * hidden, dst + hidden);
        }
        kernels::linear(s_.concat.data(), rows_, model_.weights.adapter, h_);
        return {};
      case LoopOpKind::kLoopNorm:
        kernels::rms_norm(h_, model_.weights.final_norm.data(), rows_, hidden, eps, h_);
        return {};
      case LoopOpKind::kGate:
        // Without a gate there is nothing to exit on: a hazard of sigmoid(-inf) = 0 never fires.
        for (int64_t r = 0; r < rows_; ++r)
          gate_logits_[r] = c_.has_exit_gate() ? core_.gate_logit(h_ + r * hidden)
                                               : -std::numeric_limits<float>::infinity();
        return {};
      case LoopOpKind::kResidualNorm:
      case LoopOpKind::kResidualNormProject:
        break;
    }
    return internal_error("the CPU runs the unfused loop program: no fused ops");
  }

 private:
  const OuroLayerWeights& layer(const LoopOp& op) const {
    const auto& group = op.group == LayerGroup::kPrelude ? model_.weights.prelude
                        : op.group == LayerGroup::kCoda  ? model_.weights.coda
                                                         : model_.weights.layers;
    return group[static_cast<size_t>(op.layer)];
  }

  const float* norm(const LoopOp& op, NormWeight which) const {
    if (which == NormWeight::kFinal) return model_.weights.final_norm.data();
    const OuroLayerWeights& w = layer(op);
    switch (which) {
      case NormWeight::kInput:
        return w.input_norm.data();
      case NormWeight::kAttnOut:
        return w.attn_out_norm.data();
      case NormWeight::kPostAttn:
        return w.post_attn_norm.data();
      case NormWeight::kMlpOut:
        return w.mlp_out_norm.data();
      default:
        return nullptr;
    }
  }

  void project(const LoopOp& op) {
    const OuroLayerWeights& w = layer(op);
    switch (op.proj) {
      case Projection::kQkv:
        kernels::linear(s_.normed.data(), rows_, w.qkv, s_.qkv.data());
        return;
      case Projection::kOProj:
        kernels::linear(s_.attn.data(), rows_, w.o_proj, s_.proj.data());
        return;
      case Projection::kGateUp:  // the fused gate/up matrix applies the SwiGLU
        kernels::linear(s_.normed.data(), rows_, w.gate_up, s_.act.data());
        return;
      case Projection::kDown:
        kernels::linear(s_.act.data(), rows_, w.down_proj, s_.proj.data());
        return;
    }
  }

  // Splits q/k/v, adds Huginn's q/k bias, applies RoPE at each row's position, and delegates
  // attention.
  void attend(const LoopOp& op) {
    const int64_t qd = c_.q_dim(), kvd = c_.kv_dim(), qkvd = qd + 2 * kvd;
    const std::vector<float>& bias = layer(op).qk_bias;
    kernels::parallel_rows(rows_, qkvd, [&](int64_t r) {
      const float* src = s_.qkv.data() + r * qkvd;
      float* q = s_.q.data() + r * qd;
      float* k = s_.k.data() + r * kvd;
      std::copy(src, src + qd, q);
      std::copy(src + qd, src + qd + kvd, k);
      std::copy(src + qd + kvd, src + qkvd, s_.v.data() + r * kvd);
      if (!bias.empty()) {
        for (int64_t i = 0; i < qd; ++i) q[i] += bias[static_cast<size_t>(i)];
        for (int64_t i = 0; i < kvd; ++i) k[i] += bias[static_cast<size_t>(qd + i)];
      }
      const float* cos = s_.rope_angles.data() + r * rope_.head_dim();
      rope_.apply(q, c_.num_heads, cos, cos + rope_.head_dim() / 2);
      rope_.apply(k, c_.num_kv_heads, cos, cos + rope_.head_dim() / 2);
    });
    attention_.attend(attention_layer(c_, op.group, op.layer), s_.q.data(), s_.k.data(), s_.v.data(), rows_,
                      s_.attn.data());
  }

  const OuroModel& model_;
  const io::ModelConfig& c_;
  const kernels::Rope& rope_;
  float* h_;
  const int64_t* positions_;
  int64_t rows_;
  CoreAttention& attention_;
  CoreScratch& s_;
  float* gate_logits_;
  const OuroCore& core_;
  const float* injection_;
};

}  // namespace

void OuroCore::run_loop(float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                        CoreScratch& s, float* gate_logits, const float* injection) const {
  s.ensure(model_.config, rows);
  CpuLoopExecutor executor(model_, rope_, h, positions, rows, attention, s, gate_logits, *this, injection);
  // CPU ops cannot fail (attention keeps its own status); a missing injection is a caller's bug.
  const Status st = run_loop_program(program_, executor, gate_logits != nullptr);
  if (!st.ok()) throw std::logic_error(st.message());
}

void OuroCore::run_prelude(float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                           CoreScratch& s) const {
  if (prelude_program_.empty()) return;
  s.ensure(model_.config, rows);
  CpuLoopExecutor executor(model_, rope_, h, positions, rows, attention, s, nullptr, *this, nullptr);
  (void)run_loop_program(prelude_program_, executor, false);
}

const float* OuroCore::readout(const float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                               CoreScratch& s) const {
  if (readout_program_.empty()) return h;
  s.ensure(model_.config, rows);
  const int64_t n = rows * model_.config.hidden_size;
  std::copy(h, h + n, s.readout.begin());
  CpuLoopExecutor executor(model_, rope_, s.readout.data(), positions, rows, attention, s, nullptr, *this, nullptr);
  (void)run_loop_program(readout_program_, executor, false);
  return s.readout.data();
}

void OuroCore::lm_head(const float* h, int64_t rows, float* logits) const {
  kernels::linear(h, rows, model_.weights.lm_head, logits);
}

float OuroCore::gate_logit(const float* h) const {
  const std::vector<float>& w = model_.weights.exit_gate_weight;
  float dot = 0.0f;
  for (size_t i = 0; i < w.size(); ++i) dot += h[i] * w[i];
  return dot + model_.weights.exit_gate_bias;
}

}  // namespace rlt::model
