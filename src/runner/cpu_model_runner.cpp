#include "runner/cpu_model_runner.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "common/log.h"
#include "sampling/logprobs.h"

namespace rlt::runner {

CpuModelRunner::CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                               std::unique_ptr<kv::CpuKVStorage> storage,
                               std::unique_ptr<attention::AttentionBackend> backend, int threads,
                               bool adaptive_threads)
    : model_(std::move(model)),
      core_(*model_),
      storage_(std::move(storage)),
      attention_(*storage_, std::move(backend), static_cast<int32_t>(model_->config.num_heads)),
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

  Status pass_loop(const PassInput& pass, size_t depth_index) override {
    r_.attention_.use_depth(depth_index);
    r_.core_.run_loop(r_.h_.data(), r_.positions_.data(), pass.num_rows(), r_.attention_,
                      r_.scratch_, nullptr);
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

  // Gathers the rows' states, runs one loop with the gate, scatters them back.
  Status recurrent(const PassInput& pass) override {
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
    RLT_RETURN_IF_ERROR(r_.attention_.bind(pass));
    out_->gate_logits.resize(static_cast<size_t>(n));
    r_.core_.run_loop(r_.h_.data(), r_.positions_.data(), n, r_.attention_, r_.scratch_,
                      out_->gate_logits.data());
    RLT_RETURN_IF_ERROR(r_.attention_.status());
    for (int64_t i = 0; i < n; ++i) {
      auto& s = r_.state(pass.rows[static_cast<size_t>(i)].request);
      std::copy(r_.h_.begin() + i * hidden, r_.h_.begin() + (i + 1) * hidden, s.begin());
    }
    return {};
  }

  Status coda(const ModelInput& input) override {
    const int64_t hidden = r_.model_->config.hidden_size;
    const auto n = static_cast<int64_t>(input.requests.size());
    r_.h_.resize(static_cast<size_t>(n * hidden));
    for (int64_t i = 0; i < n; ++i) {
      const auto& s = r_.state(input.requests[static_cast<size_t>(i)]);
      std::copy(s.begin(), s.end(), r_.h_.begin() + i * hidden);
    }
    out_->logits.resize(static_cast<size_t>(n * r_.model_->config.vocab_size));
    r_.core_.lm_head(r_.h_.data(), n, out_->logits.data());
    return {};
  }

 private:
  CpuModelRunner& r_;
  BatchResult* out_;
};

Status CpuModelRunner::run(const ModelInput& input, BatchResult* out) {
  Stages stages(*this, out);
  return run_stages(input, stages);
}

}  // namespace rlt::runner
