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
  RLT_RETURN_IF_ERROR(check_can_submit(input.seq, done_.size()));
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
  out->runner_logits = collected_.logits;
  return {};
}

Status CpuModelRunner::run(const ModelInput& input, BatchResult* out) {
  result_ = out;
  return run_stages(input, *this);
}

Status CpuModelRunner::embed_pass(const PassInput& pass) {
  const int64_t rows = pass.num_rows();
  positions_.clear();
  for (const auto& r : pass.rows) positions_.push_back(r.position);
  h_.resize(static_cast<size_t>(rows * model_->config.hidden_size));
  core_.embed(pass.tokens.data(), rows, h_.data());
  return {};
}

Status CpuModelRunner::bind_pass(const PassInput& pass) {
  return attention_.bind(pass);
}

Status CpuModelRunner::pass_loop(const PassInput& pass, size_t depth_index) {
  attention_.use_depth(depth_index);
  core_.run_loop(h_.data(), positions_.data(), pass.num_rows(), attention_, scratch_, nullptr);
  return attention_.status();
}

Status CpuModelRunner::keep_states(const PassInput& pass) {
  const int64_t hidden = model_->config.hidden_size;
  for (int32_t i : pass.keep_state) {
    auto& s = state(pass.rows[static_cast<size_t>(i)].request);
    std::copy(h_.begin() + i * hidden, h_.begin() + (i + 1) * hidden, s.begin());
  }
  return {};
}

Status CpuModelRunner::prelude(std::span<const kv::RequestId> requests,
                               std::span<const int32_t> tokens) {
  for (size_t i = 0; i < requests.size(); ++i)
    core_.embed(&tokens[i], 1, state(requests[i]).data());
  return {};
}

Status CpuModelRunner::recurrent(const PassInput& pass) {
  const int64_t hidden = model_->config.hidden_size;
  const int64_t n = pass.num_rows();
  h_.resize(static_cast<size_t>(n * hidden));
  positions_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const attention::PlannedRow& row = pass.rows[static_cast<size_t>(i)];
    const auto& s = state(row.request);
    std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
    positions_[static_cast<size_t>(i)] = row.position;
  }
  RLT_RETURN_IF_ERROR(attention_.bind(pass));
  result_->gate_logits.resize(static_cast<size_t>(n));
  core_.run_loop(h_.data(), positions_.data(), n, attention_, scratch_,
                 result_->gate_logits.data());
  RLT_RETURN_IF_ERROR(attention_.status());
  for (int64_t i = 0; i < n; ++i) {
    auto& s = state(pass.rows[static_cast<size_t>(i)].request);
    std::copy(h_.begin() + i * hidden, h_.begin() + (i + 1) * hidden, s.begin());
  }
  return {};
}

Status CpuModelRunner::coda(const ModelInput& input) {
  const int64_t hidden = model_->config.hidden_size;
  const auto n = static_cast<int64_t>(input.requests.size());
  h_.resize(static_cast<size_t>(n * hidden));
  for (int64_t i = 0; i < n; ++i) {
    const auto& s = state(input.requests[static_cast<size_t>(i)]);
    std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
  }
  result_->logits.resize(static_cast<size_t>(n * model_->config.vocab_size));
  core_.lm_head(h_.data(), n, result_->logits.data());
  return {};
}

}  // namespace rlt::runner
