#include "model/reference_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/cpu/dense_attention.h"
#include "model/initial_state.h"

namespace rlt::model {

// K/V per (loop, layer): [positions, kv_dim] f32, appended as rows are processed. Layers past
// the core's (Huginn's prelude and coda) have one history each, whatever the loop.
class ReferenceModel::DenseKv : public CoreAttention {
 public:
  DenseKv(const io::ModelConfig& c, bool shared)
      : c_(c),
        shared_(shared),
        k_(static_cast<size_t>((shared ? 1 : c.total_ut_steps) * c.num_layers + c.outer_layers())),
        v_(k_.size()) {}

  void set_pass(int64_t loop, int64_t first_position) {
    loop_ = loop;
    first_position_ = first_position;
  }

  void attend(int64_t layer, const float* q, const float* k, const float* v, int64_t rows,
              float* out) override {
    auto& ks = k_[slot(loop_, layer)];
    auto& vs = v_[slot(loop_, layer)];
    const int64_t kv_dim = c_.kv_dim();
    // Rows are consecutive positions of one request: position first_position_ + r.
    ks.resize(static_cast<size_t>((first_position_ + rows) * kv_dim));
    vs.resize(ks.size());
    std::copy(k, k + rows * kv_dim, ks.begin() + first_position_ * kv_dim);
    std::copy(v, v + rows * kv_dim, vs.begin() + first_position_ * kv_dim);
    scores_.resize(static_cast<size_t>(first_position_ + rows));
    const kernels::DenseAttentionShape shape{c_.num_heads, c_.num_kv_heads, c_.head_dim};
    for (int64_t r = 0; r < rows; ++r) {
      kernels::dense_attention_row(shape, q + r * c_.q_dim(), ks.data(), vs.data(),
                                   first_position_ + r + 1, scores_.data(), out + r * c_.q_dim());
    }
  }

  // last_exited finalization: deeper loops see the exit loop's K/V for `position`.
  void finalize_exit(int64_t position, int64_t exit_loop_index) {
    if (shared_) return;  // the one history already holds the exit loop's K/V
    const int64_t kv_dim = c_.kv_dim();
    for (int64_t loop = exit_loop_index + 1; loop < c_.total_ut_steps; ++loop) {
      for (int64_t l = 0; l < c_.num_layers; ++l) {
        for (auto* store : {&k_, &v_}) {
          auto& src = (*store)[slot(exit_loop_index, l)];
          auto& dst = (*store)[slot(loop, l)];
          dst.resize(static_cast<size_t>((position + 1) * kv_dim));
          std::copy(src.begin() + position * kv_dim, src.begin() + (position + 1) * kv_dim,
                    dst.begin() + position * kv_dim);
        }
      }
    }
  }

  void clear() {
    for (auto& s : k_) s.clear();
    for (auto& s : v_) s.clear();
  }

 private:
  size_t slot(int64_t loop, int64_t layer) const {
    const int64_t core_slots = (shared_ ? 1 : c_.total_ut_steps) * c_.num_layers;
    if (layer >= c_.num_layers) return static_cast<size_t>(core_slots + layer - c_.num_layers);
    return static_cast<size_t>((shared_ ? 0 : loop) * c_.num_layers + layer);
  }
  const io::ModelConfig& c_;
  bool shared_;
  std::vector<std::vector<float>> k_, v_;
  std::vector<float> scores_;
  int64_t loop_ = 0;
  int64_t first_position_ = 0;
};

ReferenceModel::ReferenceModel(std::shared_ptr<const OuroModel> model, KvSemantics semantics,
                               uint64_t noise_seed)
    : model_(std::move(model)),
      core_(*model_),
      kv_(std::make_shared<DenseKv>(model_->config, semantics == KvSemantics::kShared)),
      semantics_(semantics),
      noise_seed_(noise_seed) {}

void ReferenceModel::start_recurrence(std::span<const int32_t> tokens, const int64_t* positions,
                                      std::vector<float>& injection, std::vector<float>& state) {
  const io::ModelConfig& c = model_->config;
  const auto rows = static_cast<int64_t>(tokens.size());
  injection.resize(static_cast<size_t>(rows * c.hidden_size));
  state.resize(injection.size());
  core_.embed(tokens.data(), rows, injection.data());
  kv_->set_pass(0, positions[0]);
  core_.run_prelude(injection.data(), positions, rows, *kv_, scratch_);
  for (int64_t r = 0; r < rows; ++r) {
    draw_initial_state(noise_seed_, positions[r], c.initial_state_std,
                       std::span<float>(state).subspan(static_cast<size_t>(r * c.hidden_size),
                                                       static_cast<size_t>(c.hidden_size)));
  }
}

void ReferenceModel::reset() {
  kv_->clear();
  length_ = 0;
}

Status ReferenceModel::check_tokens(std::span<const int32_t> tokens) const {
  const io::ModelConfig& c = model_->config;
  for (int32_t t : tokens) {
    if (t < 0 || t >= c.vocab_size)
      return invalid_argument(fmt::format("token id {} is outside the vocabulary [0, {})", t, c.vocab_size));
  }
  if (length_ + static_cast<int64_t>(tokens.size()) > c.max_position_embeddings) {
    return invalid_argument(fmt::format("{} positions exceed max_position_embeddings ({})",
                                        length_ + static_cast<int64_t>(tokens.size()), c.max_position_embeddings));
  }
  return {};
}

Result<StepResult> ReferenceModel::prefill(std::span<const int32_t> tokens, bool trace, bool every_row_logits) {
  if (tokens.empty()) return invalid_argument("prefill needs at least one token");
  RLT_RETURN_IF_ERROR(check_tokens(tokens));
  if (semantics_ == KvSemantics::kShared && tokens.size() > 1) {
    // One history overwritten by every loop: a position must finish all loops before the next
    // one attends to it, so the prompt goes one position at a time.
    Result<StepResult> last = invalid_argument("unreachable");
    std::vector<float> rows;
    for (size_t i = 0; i < tokens.size(); ++i) {
      last = prefill(tokens.subspan(i, 1), trace);
      if (!last.ok()) return last;
      if (every_row_logits) rows.insert(rows.end(), last->logits.begin(), last->logits.end());
    }
    if (every_row_logits) last->row_logits = std::move(rows);
    return last;
  }
  const io::ModelConfig& c = model_->config;
  const int64_t rows = static_cast<int64_t>(tokens.size());
  std::vector<float> h(static_cast<size_t>(rows * c.hidden_size));
  std::vector<int64_t> positions(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) positions[r] = length_ + r;
  std::vector<float> gates(static_cast<size_t>(rows));
  std::vector<float> injection;
  if (c.recurrent_injection()) {
    start_recurrence(tokens, positions.data(), injection, h);
  } else {
    core_.embed(tokens.data(), rows, h.data());
  }
  StepResult out;
  for (int64_t loop = 0; loop < c.total_ut_steps; ++loop) {
    kv_->set_pass(loop, length_);
    core_.run_loop(h.data(), positions.data(), rows, *kv_, scratch_, gates.data(),
                   injection.empty() ? nullptr : injection.data());
    if (trace) {
      out.trace.hidden.push_back(h);
      if (c.has_exit_gate()) out.trace.gate_logits.push_back(gates);
    }
  }
  // Every row is read out: Huginn's coda writes its K/V for every prompt position.
  kv_->set_pass(0, length_);
  const float* head_input = core_.readout(h.data(), positions.data(), rows, *kv_, scratch_);
  out.logits.resize(static_cast<size_t>(c.vocab_size));
  core_.lm_head(head_input + (rows - 1) * c.hidden_size, 1, out.logits.data());
  if (every_row_logits) {
    out.row_logits.resize(static_cast<size_t>(rows * c.vocab_size));
    core_.lm_head(head_input, rows, out.row_logits.data());
  }
  out.exit_depth = c.total_ut_steps;
  length_ += rows;
  return out;
}

Result<StepResult> ReferenceModel::decode(int32_t token, const ExitParams& resolved, bool trace) {
  RLT_RETURN_IF_ERROR(check_tokens({&token, 1}));
  const io::ModelConfig& c = model_->config;
  std::vector<float> h(static_cast<size_t>(c.hidden_size));
  const int64_t position = length_;
  std::vector<float> injection;
  if (c.recurrent_injection()) {
    start_recurrence({&token, 1}, &position, injection, h);
  } else {
    core_.embed(&token, 1, h.data());
  }
  const bool by_gate = resolved.criterion == ExitCriterion::kGate;
  OuroExitAccumulator exit_rule(resolved);
  CriterionState criterion(resolved.criterion, resolved.criterion_threshold.value_or(0.0), h, c.vocab_size);
  const bool read_every_step = criterion_needs_logits(resolved.criterion);
  StepResult out;
  out.logits.resize(static_cast<size_t>(c.vocab_size));
  bool have_logits = false;
  for (int64_t loop = 0; loop < c.total_ut_steps; ++loop) {
    float gate = -std::numeric_limits<float>::infinity();  // stays so without a gate op (Huginn)
    kv_->set_pass(loop, position);
    core_.run_loop(h.data(), &position, 1, *kv_, scratch_, &gate, injection.empty() ? nullptr : injection.data());
    if (trace) {
      out.trace.hidden.push_back(h);
      if (c.has_exit_gate()) out.trace.gate_logits.push_back({gate});
    }
    bool exits = false;
    if (by_gate) {
      exits = exit_rule.update(loop + 1, gate);
    } else {
      if (read_every_step) {
        kv_->set_pass(0, position);
        core_.lm_head(core_.readout(h.data(), &position, 1, *kv_, scratch_), 1, out.logits.data());
        have_logits = true;
      }
      // The criterion sees every step (its running state); it may stop the token from min_loops.
      const double value = criterion.step(h, read_every_step ? std::span<const float>(out.logits) : std::span<const float>());
      exits = criterion_exit_step(resolved, loop + 1, value);
      if (trace) out.trace.criterion_values.push_back(criterion.last_value());
    }
    if (exits || loop + 1 >= resolved.max_loops || loop + 1 == c.total_ut_steps) {
      out.exit_depth = loop + 1;
      break;
    }
  }
  out.exit_probability = exit_rule.exit_probability();
  kv_->finalize_exit(position, out.exit_depth - 1);
  if (!have_logits) {
    kv_->set_pass(0, position);
    core_.lm_head(core_.readout(h.data(), &position, 1, *kv_, scratch_), 1, out.logits.data());
  }
  length_ += 1;
  return out;
}

Result<GenerateResult> ReferenceModel::generate(std::span<const int32_t> prompt, int64_t max_tokens,
                                                const ExitParams& params, bool ignore_eos,
                                                bool trace) {
  const io::ModelConfig& c = model_->config;
  if (max_tokens < 1) return invalid_argument(fmt::format("max_tokens must be at least 1, got {}", max_tokens));
  // The last sampled token is never fed back, so it needs no position.
  const int64_t needed = static_cast<int64_t>(prompt.size()) + max_tokens - 1;
  if (needed > c.max_position_embeddings) {
    return invalid_argument(fmt::format("prompt ({} tokens) + max_tokens ({}) - 1 = {} exceeds "
                                        "max_position_embeddings ({}); shorten the prompt or lower max_tokens",
                                        prompt.size(), max_tokens, needed, c.max_position_embeddings));
  }
  RLT_ASSIGN_OR_RETURN(ExitParams resolved, resolve_exit_params(params, c.total_ut_steps));
  // Without an exit gate there is nothing to exit on (as the engine decides it).
  if (!c.has_exit_gate()) resolved.threshold = 1.0;
  if (resolved.criterion != ExitCriterion::kGate && !c.recurrent_injection()) {
    return invalid_argument(fmt::format("the {} exit criterion is Huginn's; a {} model exits by its gate (criterion gate)",
                                        rlt::name(resolved.criterion), c.model_type));
  }
  if (c.recurrent_injection() && semantics_ == KvSemantics::kShared) {
    return invalid_argument("Huginn keeps one K/V history per recurrence step (last_exited); the shared layout is not defined for it");
  }
  reset();
  RLT_ASSIGN_OR_RETURN(StepResult step, prefill(prompt, trace));
  const std::vector<int64_t> eos = model_->eos_token_ids();
  GenerateResult out;
  out.finish_reason = "length";
  while (true) {
    const auto token = static_cast<int32_t>(kernels::argmax(step.logits.data(), c.vocab_size));
    out.tokens.push_back(token);
    out.exit_depths.push_back(step.exit_depth);
    if (trace) out.steps.push_back(step);
    if (!ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
      out.finish_reason = "stop";
      break;
    }
    if (static_cast<int64_t>(out.tokens.size()) >= max_tokens) break;
    RLT_ASSIGN_OR_RETURN(step, decode(token, resolved, trace));
  }
  return out;
}

}  // namespace rlt::model
