#include "runner/cpu_model_runner.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <limits>

#include "common/log.h"
#include "model/initial_state.h"
#include "sampling/logprobs.h"

namespace rlt::runner {

CpuModelRunner::CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                               std::unique_ptr<kv::CpuKVStorage> storage,
                               std::unique_ptr<attention::AttentionBackend> backend, int threads,
                               bool adaptive_threads)
    : model_(std::move(model)),
      core_(*model_),
      storage_(std::move(storage)),
      attention_(*storage_, std::move(backend), static_cast<int32_t>(model_->config.num_heads),
                 model_->config.recurrent_injection() ? model::outer_kv_planes(model_->config) : 0),
      threads_max_(std::max(1, threads)),
      threads_now_(threads_max_) {
  if (adaptive_threads && threads_max_ > 1) share_.emplace(threads_max_);
}

void CpuModelRunner::adapt_threads() {
  if (!share_) return;
  const int n = share_->threads();
  if (n != threads_now_) {
    log_info(fmt::format("CPU kernel threads {} -> {}: other processes keep {:.1f} CPUs busy", threads_now_, n,
                         share_->others_busy()));
    threads_now_ = n;
  }
  // The calling thread's setting: the parallel regions of this batch start from it.
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
  if (n < threads_max_) ++reduced_batches_;
}

std::vector<float>& CpuModelRunner::state(kv::RequestId id) {
  auto& h = hidden_[id];
  h.resize(static_cast<size_t>(model_->config.hidden_size));
  return h;
}

Status CpuModelRunner::submit(const ModelInput& input) {
  RLT_RETURN_IF_ERROR(check_can_submit(input.seq, done_.size()));
  adapt_threads();
  BatchResult result;
  RLT_RETURN_IF_ERROR(run(input, &result));
  done_.emplace_back(input.seq, std::move(result));
  return {};
}

Status CpuModelRunner::collect(uint64_t seq, BatchResult* out) {
  RLT_RETURN_IF_ERROR(check_collect_order(
      seq, done_.empty() ? std::nullopt : std::optional<uint64_t>(done_.front().first)));
  collected_ = std::move(done_.front().second);
  done_.pop_front();
  // The logits stay here until the next collect(), as a device runner's pinned buffer would.
  *out = BatchResult();
  out->gate_logits = std::move(collected_.gate_logits);
  out->exit_values = std::move(collected_.exit_values);
  out->prompt_scores = std::move(collected_.prompt_scores);
  out->runner_logits = collected_.logits;
  return {};
}

// The stages' steps (runner/stage_driver.h) on the CPU kernels; h_ holds the pass's rows.
class CpuModelRunner::Stages final : public StageExecutor {
 public:
  Stages(CpuModelRunner& runner, BatchResult* out) : r_(runner), out_(out) {}

  Status embed_pass(const PassInput& pass) override {
    const int64_t rows = pass.num_rows();
    r_.positions_.clear();
    for (const auto& row : pass.rows) r_.positions_.push_back(row.position);
    r_.h_.resize(static_cast<size_t>(rows * r_.model_->config.hidden_size));
    r_.core_.embed(pass.tokens.data(), rows, r_.h_.data());
    return {};
  }

  Status bind_pass(const PassInput& pass) override { return r_.attention_.bind(pass); }

  // Huginn: the prelude over the embedded rows (h_) gives the injection; h_ becomes the rows'
  // initial states.
  Status pass_prelude(const PassInput& pass) override {
    if (!huginn()) return {};
    const int64_t rows = pass.num_rows(), hidden = r_.model_->config.hidden_size;
    if (pass.seeds.size() != static_cast<size_t>(rows))
      return internal_error(fmt::format("a Huginn pass of {} rows has {} seeds", rows, pass.seeds.size()));
    r_.core_.run_prelude(r_.h_.data(), r_.positions_.data(), rows, r_.attention_, r_.scratch_);
    RLT_RETURN_IF_ERROR(r_.attention_.status());
    r_.injection_.assign(r_.h_.begin(), r_.h_.begin() + rows * hidden);
    for (int64_t i = 0; i < rows; ++i) {
      model::draw_initial_state(pass.seeds[static_cast<size_t>(i)], r_.positions_[static_cast<size_t>(i)],
                                r_.model_->config.initial_state_std,
                                std::span<float>(r_.h_).subspan(static_cast<size_t>(i * hidden), static_cast<size_t>(hidden)));
    }
    return {};
  }

  Status pass_loop(const PassInput& pass, size_t depth_index) override {
    r_.attention_.use_depth(depth_index);
    r_.core_.run_loop(r_.h_.data(), r_.positions_.data(), pass.num_rows(), r_.attention_,
                      r_.scratch_, nullptr, huginn() ? r_.injection_.data() : nullptr);
    return r_.attention_.status();
  }

  // Huginn: h_ becomes the readout (the coda writes its K/V); others: the loop norm already ran.
  Status pass_readout(const PassInput& pass) override {
    if (!huginn()) return {};
    read_out(pass.num_rows());
    return r_.attention_.status();
  }

  Status keep_states(const PassInput& pass) override {
    const int64_t hidden = r_.model_->config.hidden_size;
    for (int32_t i : pass.keep_state) {
      auto& s = r_.state(pass.rows[static_cast<size_t>(i)].request);
      std::copy(r_.h_.begin() + i * hidden, r_.h_.begin() + (i + 1) * hidden, s.begin());
    }
    return {};
  }

  // The lm head over blocks of the scored rows (bounded memory for a long prompt), each row's
  // log-softmax in parallel.
  Status score_rows(const PassInput& pass) override {
    const int64_t hidden = r_.model_->config.hidden_size, vocab = r_.model_->config.vocab_size;
    constexpr int64_t kBlock = 32;
    const auto total = static_cast<int64_t>(pass.scores.size());
    for (int64_t begin = 0; begin < total; begin += kBlock) {
      const int64_t n = std::min(kBlock, total - begin);
      r_.score_h_.resize(static_cast<size_t>(n * hidden));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = pass.scores[static_cast<size_t>(begin + i)].row;
        std::copy(r_.h_.begin() + row * hidden, r_.h_.begin() + (row + 1) * hidden,
                  r_.score_h_.begin() + i * hidden);
      }
      r_.score_logits_.resize(static_cast<size_t>(n * vocab));
      r_.core_.lm_head(r_.score_h_.data(), n, r_.score_logits_.data());
      std::vector<Result<sampling::ScoredToken>> scored(static_cast<size_t>(n),
                                                         internal_error("not scored"));
#pragma omp parallel for schedule(dynamic) if (n > 1)
      for (int64_t i = 0; i < n; ++i) {
        const ScoreRow& s = pass.scores[static_cast<size_t>(begin + i)];
        scored[static_cast<size_t>(i)] = sampling::score_token(
            std::span<const float>(r_.score_logits_).subspan(static_cast<size_t>(i * vocab),
                                                             static_cast<size_t>(vocab)),
            s.target, s.top);
      }
      for (int64_t i = 0; i < n; ++i) {
        const ScoreRow& s = pass.scores[static_cast<size_t>(begin + i)];
        const attention::PlannedRow& row = pass.rows[static_cast<size_t>(s.row)];
        Result<sampling::ScoredToken>& r = scored[static_cast<size_t>(i)];
        if (r.ok()) {
          out_->prompt_scores.push_back({row.request, row.position, std::move(*r), {}});
        } else {
          out_->prompt_scores.push_back(
              {row.request, row.position, {}, fmt::format("position {}: {}", row.position, r.status().message())});
        }
      }
    }
    return {};
  }

  Status pass_logits(const PassInput& pass) override {
    out_->logits.resize(static_cast<size_t>(pass.num_rows() * r_.model_->config.vocab_size));
    r_.core_.lm_head(r_.h_.data(), pass.num_rows(), out_->logits.data());
    return {};
  }

  Status prelude(std::span<const kv::RequestId> requests,
                 std::span<const int32_t> tokens) override {
    for (size_t i = 0; i < requests.size(); ++i)
      r_.core_.embed(&tokens[i], 1, r_.state(requests[i]).data());
    return {};
  }

  // Huginn: each fed token through the prelude; its output is the token's injection, its state
  // starts from the seeded noise, and its exit criterion starts afresh.
  Status prelude_pass(const PassInput& pass) override {
    if (!huginn()) return internal_error("a prelude pass for a model whose prelude does not attend");
    RLT_RETURN_IF_ERROR(embed_pass(pass));
    RLT_RETURN_IF_ERROR(bind_pass(pass));
    RLT_RETURN_IF_ERROR(pass_prelude(pass));
    const int64_t hidden = r_.model_->config.hidden_size;
    for (int64_t i = 0; i < pass.num_rows(); ++i) {
      const kv::RequestId id = pass.rows[static_cast<size_t>(i)].request;
      Recurrence& rec = r_.recurrence_[id];
      rec.injection.assign(r_.injection_.begin() + i * hidden, r_.injection_.begin() + (i + 1) * hidden);
      rec.criterion.reset();
      rec.logits_current = false;
      std::copy(r_.h_.begin() + i * hidden, r_.h_.begin() + (i + 1) * hidden, r_.state(id).begin());
    }
    return {};
  }

  // Gathers the rows' states, runs one loop with the gate, scatters them back. Huginn: the step
  // reads each row's injection, and each row's exit criterion is fed (the readout's logits for
  // the criteria that need them: then every row of the pass is read out).
  Status recurrent(const PassInput& pass) override {
    const int64_t hidden = r_.model_->config.hidden_size;
    const int64_t n = pass.num_rows();
    gather_states(pass);
    if (huginn()) RLT_RETURN_IF_ERROR(gather_injections(pass));
    RLT_RETURN_IF_ERROR(r_.attention_.bind(pass));
    // A model without a gate op (Huginn) leaves -inf: sigmoid(-inf) = 0 never fires.
    out_->gate_logits.assign(static_cast<size_t>(n), -std::numeric_limits<float>::infinity());
    r_.core_.run_loop(r_.h_.data(), r_.positions_.data(), n, r_.attention_, r_.scratch_,
                      out_->gate_logits.data(), huginn() ? r_.injection_.data() : nullptr);
    RLT_RETURN_IF_ERROR(r_.attention_.status());
    if (huginn()) RLT_RETURN_IF_ERROR(exit_values(pass));
    for (int64_t i = 0; i < n; ++i) {
      auto& s = r_.state(pass.rows[static_cast<size_t>(i)].request);
      std::copy(r_.h_.begin() + i * hidden, r_.h_.begin() + (i + 1) * hidden, s.begin());
    }
    return {};
  }

  Status coda(const ModelInput& input) override {
    const int64_t hidden = r_.model_->config.hidden_size;
    const auto n = static_cast<int64_t>(input.requests.size());
    out_->logits.resize(static_cast<size_t>(n * r_.model_->config.vocab_size));
    if (huginn()) {
      // The readout attends: the engine planned one pass over the requests' positions.
      if (input.passes().size() != 1 || input.passes()[0].num_rows() != n)
        return internal_error("a Huginn CODA batch needs one pass over its requests");
      const PassInput& pass = input.passes()[0];
      if (reuse_step_logits(pass)) return {};
      gather_states(pass);
      RLT_RETURN_IF_ERROR(r_.attention_.bind(pass));
      read_out(n);
      RLT_RETURN_IF_ERROR(r_.attention_.status());
      r_.core_.lm_head(r_.h_.data(), n, out_->logits.data());
      return {};
    }
    r_.h_.resize(static_cast<size_t>(n * hidden));
    for (int64_t i = 0; i < n; ++i) {
      const auto& s = r_.state(input.requests[static_cast<size_t>(i)]);
      std::copy(s.begin(), s.end(), r_.h_.begin() + i * hidden);
    }
    r_.core_.lm_head(r_.h_.data(), n, out_->logits.data());
    return {};
  }

 private:
  bool huginn() const { return r_.model_->config.recurrent_injection(); }

  // h_ and positions_ = the pass's rows' states and positions.
  void gather_states(const PassInput& pass) {
    const int64_t hidden = r_.model_->config.hidden_size;
    const int64_t n = pass.num_rows();
    r_.h_.resize(static_cast<size_t>(n * hidden));
    r_.positions_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const attention::PlannedRow& row = pass.rows[static_cast<size_t>(i)];
      const auto& s = r_.state(row.request);
      std::copy(s.begin(), s.end(), r_.h_.begin() + i * hidden);
      r_.positions_[static_cast<size_t>(i)] = row.position;
    }
  }

  Status gather_injections(const PassInput& pass) {
    const int64_t hidden = r_.model_->config.hidden_size;
    r_.injection_.resize(static_cast<size_t>(pass.num_rows() * hidden));
    for (size_t i = 0; i < pass.rows.size(); ++i) {
      auto it = r_.recurrence_.find(pass.rows[i].request);
      if (it == r_.recurrence_.end() || it->second.injection.empty())
        return internal_error(fmt::format("request {} reached a recurrence step before its prelude", pass.rows[i].request));
      std::copy(it->second.injection.begin(), it->second.injection.end(), r_.injection_.begin() + static_cast<int64_t>(i) * hidden);
    }
    return {};
  }

  // When every row's exit step read its state out (its criterion needed the logits), those are the
  // logits CODA would compute, and the coda's K/V of the rows are already that state's: copied.
  bool reuse_step_logits(const PassInput& pass) {
    const auto vocab = static_cast<size_t>(r_.model_->config.vocab_size);
    for (const attention::PlannedRow& row : pass.rows) {
      auto it = r_.recurrence_.find(row.request);
      if (it == r_.recurrence_.end() || !it->second.logits_current) return false;
    }
    for (size_t i = 0; i < pass.rows.size(); ++i) {
      const std::vector<float>& logits = r_.recurrence_[pass.rows[i].request].logits;
      std::copy(logits.begin(), logits.end(), out_->logits.begin() + static_cast<int64_t>(i * vocab));
    }
    return true;
  }

  // h_ = the readout of its first `rows` rows (the lm head's input).
  void read_out(int64_t rows) {
    const float* out = r_.core_.readout(r_.h_.data(), r_.positions_.data(), rows, r_.attention_, r_.scratch_);
    std::copy(out, out + rows * r_.model_->config.hidden_size, r_.h_.begin());
  }

  // out_->exit_values: each row's criterion value after this step. h_ holds the steps' states
  // (left as they are); the readout, when a row's criterion needs logits, runs on a copy.
  Status exit_values(const PassInput& pass) {
    const io::ModelConfig& c = r_.model_->config;
    const int64_t n = pass.num_rows(), hidden = c.hidden_size, vocab = c.vocab_size;
    if (pass.criteria.size() != static_cast<size_t>(n))
      return internal_error(fmt::format("a Huginn recurrent pass of {} rows has {} exit criteria", n, pass.criteria.size()));
    bool logits = false;
    for (ExitCriterion criterion : pass.criteria) logits = logits || model::criterion_needs_logits(criterion);
    if (logits) {
      const float* head_input = r_.core_.readout(r_.h_.data(), r_.positions_.data(), n, r_.attention_, r_.scratch_);
      RLT_RETURN_IF_ERROR(r_.attention_.status());
      r_.step_logits_.resize(static_cast<size_t>(n * vocab));
      r_.core_.lm_head(head_input, n, r_.step_logits_.data());
    }
    out_->exit_values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      Recurrence& rec = r_.recurrence_[pass.rows[static_cast<size_t>(i)].request];
      const ExitCriterion criterion = pass.criteria[static_cast<size_t>(i)];
      // The first step of a token: the criterion starts from the state before it (the noise).
      if (!rec.criterion) rec.criterion.emplace(criterion, 0.0, r_.state(pass.rows[static_cast<size_t>(i)].request), vocab);
      const std::span<const float> state(r_.h_.data() + i * hidden, static_cast<size_t>(hidden));
      const std::span<const float> row_logits =
          model::criterion_needs_logits(criterion)
              ? std::span<const float>(r_.step_logits_.data() + i * vocab, static_cast<size_t>(vocab))
              : std::span<const float>();
      out_->exit_values[static_cast<size_t>(i)] = rec.criterion->step(state, row_logits);
      rec.logits_current = logits;
      if (logits) rec.logits.assign(r_.step_logits_.begin() + i * vocab, r_.step_logits_.begin() + (i + 1) * vocab);
    }
    return {};
  }

  CpuModelRunner& r_;
  BatchResult* out_;
};

Status CpuModelRunner::run(const ModelInput& input, BatchResult* out) {
  Stages stages(*this, out);
  return run_stages(input, stages);
}

}  // namespace rlt::runner
