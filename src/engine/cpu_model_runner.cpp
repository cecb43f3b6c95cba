#include "engine/cpu_model_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "engine/batch_rows.h"

namespace rlt::engine {

CpuModelRunner::CpuModelRunner(std::shared_ptr<const model::OuroModel> model,
                               std::unique_ptr<kv::CpuKVStorage> storage,
                               std::unique_ptr<attention::AttentionBackend> backend,
                               const attention::BackendCapabilities& caps, kv::KVLayout layout)
    : model_(std::move(model)),
      core_(*model_),
      storage_(std::move(storage)),
      attention_(*storage_, std::move(backend), caps,
                 static_cast<int32_t>(model_->config.num_heads)),
      layout_(layout) {}

std::vector<float>& CpuModelRunner::state(kv::RequestId id) {
  auto& h = hidden_[id];
  h.resize(static_cast<size_t>(model_->config.hidden_size));
  return h;
}

Status CpuModelRunner::submit(const sched::SchedulerOutput& batch,
                              const sched::Scheduler& scheduler, const kv::KVCacheManager& kv,
                              const BatchInputs& /*inputs*/) {
  if (done_.size() >= static_cast<size_t>(kMaxInFlight)) {
    return internal_error(fmt::format("batch {} submitted with {} batches uncollected (at most {})",
                                      batch.seq, done_.size(), kMaxInFlight));
  }
  BatchResult result;
  RLT_RETURN_IF_ERROR(run(batch, scheduler, kv, &result));
  done_.emplace_back(batch.seq, std::move(result));
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

Status CpuModelRunner::run(const sched::SchedulerOutput& batch, const sched::Scheduler& scheduler,
                           const kv::KVCacheManager& kv, BatchResult* out) {
  const int64_t hidden = model_->config.hidden_size;
  const auto n = static_cast<int64_t>(batch.items.size());
  RLT_RETURN_IF_ERROR(check_batch_requests(batch, scheduler));
  switch (batch.stage) {
    case sched::Stage::kPrefill:
      return layout_ == kv::KVLayout::kShared ? prefill_waves(batch, scheduler, kv)
                                              : prefill(batch, scheduler, kv);
    case sched::Stage::kPrelude:
      for (const auto& item : batch.items) {
        const sched::Request& r = *scheduler.find(item.id);
        const int32_t token = r.output_tokens.back();
        core_.embed(&token, 1, state(item.id).data());
      }
      return {};
    case sched::Stage::kRecurrent: {
      h_.resize(static_cast<size_t>(n * hidden));
      positions_.resize(static_cast<size_t>(n));
      rows_.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const auto& item = batch.items[static_cast<size_t>(i)];
        const auto& s = state(item.id);
        std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
        positions_[static_cast<size_t>(i)] = item.position;
        rows_[static_cast<size_t>(i)] = {item.id, item.depth, item.position};
      }
      RLT_RETURN_IF_ERROR(attention_.plan(rows_, {}, kv, /*packed=*/false));
      out->gate_logits.resize(static_cast<size_t>(n));
      core_.run_loop(h_.data(), positions_.data(), n, attention_, scratch_,
                     out->gate_logits.data());
      RLT_RETURN_IF_ERROR(attention_.status());
      for (int64_t i = 0; i < n; ++i) {
        auto& s = state(batch.items[static_cast<size_t>(i)].id);
        std::copy(h_.begin() + i * hidden, h_.begin() + (i + 1) * hidden, s.begin());
      }
      return {};
    }
    case sched::Stage::kCoda: {
      h_.resize(static_cast<size_t>(n * hidden));
      for (int64_t i = 0; i < n; ++i) {
        const auto& s = state(batch.items[static_cast<size_t>(i)].id);
        std::copy(s.begin(), s.end(), h_.begin() + i * hidden);
      }
      out->logits.resize(static_cast<size_t>(n * model_->config.vocab_size));
      core_.lm_head(h_.data(), n, out->logits.data());
      return {};
    }
    default:
      return internal_error(
          fmt::format("cannot execute a {} batch", sched::stage_name(batch.stage)));
  }
}

void CpuModelRunner::stage_rows() {
  positions_.clear();
  for (const auto& r : rows_) positions_.push_back(r.position);
  h_.resize(static_cast<size_t>(static_cast<int64_t>(rows_.size()) * model_->config.hidden_size));
  core_.embed(tokens_.data(), static_cast<int64_t>(rows_.size()), h_.data());
}

void CpuModelRunner::keep_prompt_states(const sched::Scheduler& scheduler) {
  const int64_t hidden = model_->config.hidden_size;
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (!ends_prompt(rows_[i], scheduler)) continue;
    auto& s = state(rows_[i].request);
    std::copy(h_.begin() + static_cast<int64_t>(i) * hidden,
              h_.begin() + static_cast<int64_t>(i + 1) * hidden, s.begin());
  }
}

Status CpuModelRunner::prefill(const sched::SchedulerOutput& batch,
                               const sched::Scheduler& scheduler, const kv::KVCacheManager& kv) {
  collect_prefill_rows(batch, scheduler, tokens_, rows_);
  stage_rows();
  const auto rows = static_cast<int64_t>(rows_.size());
  // Loop-major: loop t of every chunk row needs only loop-t K/V, so chunks are exact.
  depths_.resize(static_cast<size_t>(model_->config.total_ut_steps));
  std::iota(depths_.begin(), depths_.end(), 0);
  RLT_RETURN_IF_ERROR(attention_.plan(rows_, depths_, kv, /*packed=*/true));
  for (size_t d = 0; d < depths_.size(); ++d) {
    attention_.use_depth(d);
    core_.run_loop(h_.data(), positions_.data(), rows, attention_, scratch_, nullptr);
    RLT_RETURN_IF_ERROR(attention_.status());
  }
  keep_prompt_states(scheduler);
  return {};
}

Status CpuModelRunner::prefill_waves(const sched::SchedulerOutput& batch,
                                     const sched::Scheduler& scheduler,
                                     const kv::KVCacheManager& kv) {
  // `shared` keeps one plane that every loop overwrites, so a position must finish all its loops
  // before the next position attends to it: one wave per position offset. (One plan serves a
  // wave's loops: every depth maps to that plane.)
  depths_.resize(static_cast<size_t>(model_->config.total_ut_steps));
  std::iota(depths_.begin(), depths_.end(), 0);
  for (int32_t offset = 0; offset < longest_chunk(batch); ++offset) {
    collect_wave_rows(batch, scheduler, offset, tokens_, rows_);
    stage_rows();
    const auto rows = static_cast<int64_t>(rows_.size());
    RLT_RETURN_IF_ERROR(attention_.plan(rows_, depths_, kv, /*packed=*/false));
    for (size_t d = 0; d < depths_.size(); ++d) {
      attention_.use_depth(d);
      core_.run_loop(h_.data(), positions_.data(), rows, attention_, scratch_, nullptr);
      RLT_RETURN_IF_ERROR(attention_.status());
    }
    keep_prompt_states(scheduler);
  }
  return {};
}

}  // namespace rlt::engine
