#include "model/ouro_core.h"

#include "kernels/cpu/linear.h"

namespace rlt::model {

void CoreScratch::ensure(const io::ModelConfig& c, int64_t rows) {
  auto fit = [](std::vector<float>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
  };
  fit(normed, rows * c.hidden_size);
  fit(q, rows * c.q_dim());
  fit(k, rows * c.kv_dim());
  fit(v, rows * c.kv_dim());
  fit(attn, rows * c.q_dim());
  fit(proj, rows * c.hidden_size);
  fit(gate, rows * c.intermediate_size);
  fit(up, rows * c.intermediate_size);
}

OuroCore::OuroCore(const OuroModel& model)
    : model_(model), rope_(model.config.head_dim, model.config.rope_theta) {}

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
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const OuroLayerWeights& w = model_.weights.layers[static_cast<size_t>(l)];
    // Attention block: pre-norm, projections, RoPE, attention, o_proj, post-norm on the output.
    kernels::rms_norm(h, w.input_norm.data(), rows, hidden, eps, s.normed.data());
    kernels::linear(s.normed.data(), rows, w.q_proj, s.q.data());
    kernels::linear(s.normed.data(), rows, w.k_proj, s.k.data());
    kernels::linear(s.normed.data(), rows, w.v_proj, s.v.data());
    for (int64_t r = 0; r < rows; ++r) {
      rope_.apply(s.q.data() + r * c.q_dim(), c.num_heads, positions[r]);
      rope_.apply(s.k.data() + r * c.kv_dim(), c.num_kv_heads, positions[r]);
    }
    attention.attend(l, s.q.data(), s.k.data(), s.v.data(), rows, s.attn.data());
    kernels::linear(s.attn.data(), rows, w.o_proj, s.proj.data());
    kernels::rms_norm(s.proj.data(), w.attn_out_norm.data(), rows, hidden, eps, s.proj.data());
    for (int64_t i = 0; i < rows * hidden; ++i) h[i] += s.proj[static_cast<size_t>(i)];
    // MLP block: pre-norm, SwiGLU, post-norm on the output.
    kernels::rms_norm(h, w.post_attn_norm.data(), rows, hidden, eps, s.normed.data());
    kernels::linear(s.normed.data(), rows, w.gate_proj, s.gate.data());
    kernels::linear(s.normed.data(), rows, w.up_proj, s.up.data());
    kernels::silu_mul(s.gate.data(), s.up.data(), rows * c.intermediate_size, s.gate.data());
    kernels::linear(s.gate.data(), rows, w.down_proj, s.proj.data());
    kernels::rms_norm(s.proj.data(), w.mlp_out_norm.data(), rows, hidden, eps, s.proj.data());
    for (int64_t i = 0; i < rows * hidden; ++i) h[i] += s.proj[static_cast<size_t>(i)];
  }
  // The loop norm replaces h: it is both the next loop's input and the lm head's input.
  kernels::rms_norm(h, model_.weights.final_norm.data(), rows, hidden, eps, h);
  if (gate_logits != nullptr)
    for (int64_t r = 0; r < rows; ++r) gate_logits[r] = gate_logit(h + r * hidden);
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
