#include "model/ouro_core.h"

#include <limits>

#include <algorithm>

#include "kernels/cpu/linear.h"
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
}

OuroCore::OuroCore(const OuroModel& model)
    : model_(model), rope_(rope_inv_freq(model.config)) {}

void OuroCore::embed(const int32_t* tokens, int64_t rows, float* h) const {
  const int64_t hidden = model_.config.hidden_size;
  for (int64_t r = 0; r < rows; ++r) kernels::embedding_row(model_.weights.embed_tokens, tokens[r], h + r * hidden);
}

void OuroCore::run_loop(float* h, const int64_t* positions, int64_t rows, CoreAttention& attention,
                        CoreScratch& s, float* gate_logits) const {
  const io::ModelConfig& c = model_.config;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t hidden = c.hidden_size;
  s.ensure(c, rows);
  const int64_t qd = c.q_dim(), kvd = c.kv_dim(), qkvd = qd + 2 * kvd;
  // The residual add of a sub-block: Ouro normalizes the sub-block output first (sandwich).
  auto residual = [&](const std::vector<float>& out_norm) {
    if (c.sandwich_norms()) {
      kernels::add_rms_norm(h, s.proj.data(), out_norm.data(), rows, hidden, eps);
    } else {
      kernels::add_in_place(h, s.proj.data(), rows * hidden);
    }
  };
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const OuroLayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
    // Attention block: pre-norm, one pass for q/k/v, RoPE, attention, o_proj, residual.
    kernels::rms_norm(h, w.input_norm.data(), rows, hidden, eps, s.normed.data());
    kernels::linear(s.normed.data(), rows, w.qkv, s.qkv.data());
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = s.qkv.data() + r * qkvd;
      float* q = s.q.data() + r * qd;
      float* k = s.k.data() + r * kvd;
      std::copy(src, src + qd, q);
      std::copy(src + qd, src + qd + kvd, k);
      std::copy(src + qd + kvd, src + qkvd, s.v.data() + r * kvd);
      rope_.apply(q, c.num_heads, positions[r]);
      rope_.apply(k, c.num_kv_heads, positions[r]);
    }
    attention.attend(l, s.q.data(), s.k.data(), s.v.data(), rows, s.attn.data());
    kernels::linear(s.attn.data(), rows, w.o_proj, s.proj.data());
    residual(w.attn_out_norm);
    // MLP block: pre-norm, fused gate/up + SwiGLU, down_proj, residual.
    kernels::rms_norm(h, w.post_attn_norm.data(), rows, hidden, eps, s.normed.data());
    kernels::linear(s.normed.data(), rows, w.gate_up, s.act.data());
    kernels::linear(s.act.data(), rows, w.down_proj, s.proj.data());
    residual(w.mlp_out_norm);
  }
  // The loop norm replaces h: it is both the next loop's input and the lm head's input.
  kernels::rms_norm(h, model_.weights.final_norm.data(), rows, hidden, eps, h);
  if (gate_logits != nullptr)
    // Without a gate there is nothing to exit on: a hazard of sigmoid(-inf) = 0 never fires.
    for (int64_t r = 0; r < rows; ++r)
      gate_logits[r] = c.has_exit_gate() ? gate_logit(h + r * hidden) : -std::numeric_limits<float>::infinity();
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
