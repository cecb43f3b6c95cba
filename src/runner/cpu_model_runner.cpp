#include "runner/cpu_model_runner.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlt::runner {

CpuModelRunner::CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                               std::unique_ptr<kv::CpuKVStorage> storage,
                               std::unique_ptr<attention::AttentionBackend> backend)
    : model_(std::move(model)),
      core_(*model_),
      storage_(std::move(storage)),
      attention_(*storage_, std::move(backend), static_cast<int32_t>(model_->config.num_heads)) {}

std::vector<float>& CpuModelRunner::state(kv::RequestId id) {
  auto& h = hidden_[id];
  h.resize(static_cast<size_t>(model_->config.hidden_size));
  return h;
}

Status CpuModelRunner::submit(const ModelInput& input) {
  if (done_.size() >= static_cast<size_t>(kMaxInFlight)) {
    return internal_error(fmt::format("batch {} submitted with {} batches uncollected (at most {})",
                                      input.seq, done_.size(), kMaxInFlight));
  }
  BatchResult result;
  RLT_RETURN_IF_ERROR(run(input, &result));
  done_.emplace_back(input.seq, std::move(result));
  return {};
}

Status CpuModelRunner::collect(uint64_t seq, BatchResult* out) {
  if (done_.empty() || done_.front().first != seq) {
    return internal_error(
        fmt::format("collect of batch {} but the oldest uncollected batch is {}", seq,
                    done_.empty() ? std::string("none") : std::to_string(done_.front().first)));
  }
  collected_ = std::move(done_.front().second);
  done_.pop_front();
  // The logits stay here until the next collect(), as a device runner's pinned buffer would.
  *out = BatchResult();
  out->gate_logits = std::move(collected_.gate_logits);
  out->runner_logits = collected_.logits;
  return {};
}

Status CpuModelRunner::run(const ModelInput& input, BatchResult* out) {
  const int64_t hidden = model_->config.hidden_size;
  const auto n = static_cast<int64_t>(input.requests.size());
  switch (input.stage) {
    case Stage::kPrefill:
      for (const PassInput& pass : input.passes()) RLT_RETURN_IF_ERROR(prefill_pass(pass));
      return {};
    case Stage::kPrelude:
      for (int64_t i = 0; i < n; ++i) {
        const auto row = static_cast<size_t>(i);
        core_.embed(&input.tokens[row], 1, state(input.requests[row]).data());
      }
      return {};
    case Stage::kRecurrent: {
      const PassInput& pass = input.passes()[0];
      h_.resize(static_cast<size_t>(n * hidden));
      positions_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const attention::PlannedRow& row = pass.rows[static_cast<size_t>(i)];
        const auto& s = state(row.request);
        std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
        positions_[static_cast<size_t>(i)] = row.position;
      }
      RLT_RETURN_IF_ERROR(attention_.bind(pass));
      out->gate_logits.resize(static_cast<size_t>(n));
      core_.run_loop(h_.data(), positions_.data(), n, attention_, scratch_,
                     out->gate_logits.data());
      RLT_RETURN_IF_ERROR(attention_.status());
      for (int64_t i = 0; i < n; ++i) {
        auto& s = state(pass.rows[static_cast<size_t>(i)].request);
        std::copy(h_.begin() + i * hidden, h_.begin() + (i + 1) * hidden, s.begin());
      }
      return {};
    }
    case Stage::kCoda: {
      h_.resize(static_cast<size_t>(n * hidden));
      for (int64_t i = 0; i < n; ++i) {
        const auto& s = state(input.requests[static_cast<size_t>(i)]);
        std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
      }
      out->logits.resize(static_cast<size_t>(n * model_->config.vocab_size));
      core_.lm_head(h_.data(), n, out->logits.data());
      return {};
    }
  }
  return internal_error(fmt::format("cannot execute a {} batch", stage_name(input.stage)));
}

Status CpuModelRunner::prefill_pass(const PassInput& pass) {
  const int64_t hidden = model_->config.hidden_size;
  const int64_t rows = pass.num_rows();
  positions_.clear();
  for (const auto& r : pass.rows) positions_.push_back(r.position);
  h_.resize(static_cast<size_t>(rows * hidden));
  core_.embed(pass.tokens.data(), rows, h_.data());
  RLT_RETURN_IF_ERROR(attention_.bind(pass));
  for (size_t d = 0; d < pass.num_loops(); ++d) {
    attention_.use_depth(d);
    core_.run_loop(h_.data(), positions_.data(), rows, attention_, scratch_, nullptr);
    RLT_RETURN_IF_ERROR(attention_.status());
  }
  for (int32_t i : pass.keep_state) {
    auto& s = state(pass.rows[static_cast<size_t>(i)].request);
    std::copy(h_.begin() + i * hidden, h_.begin() + (i + 1) * hidden, s.begin());
  }
  return {};
}

}  // namespace rlt::runner
