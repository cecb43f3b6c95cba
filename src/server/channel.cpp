#include "server/channel.h"

namespace rlt::server {

void Channel::push(size_t choice, int32_t prompt_tokens, std::span<const int32_t> tokens,
                   std::span<const int32_t> exit_depths, std::span<const TokenLogprobs> logprobs, bool finished,
                   const std::string& finish_reason, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    TokenBatch& b = pending_.at(choice);
    b.prompt_tokens = prompt_tokens;
    b.tokens.insert(b.tokens.end(), tokens.begin(), tokens.end());
    b.exit_depths.insert(b.exit_depths.end(), exit_depths.begin(), exit_depths.end());
    b.logprobs.insert(b.logprobs.end(), logprobs.begin(), logprobs.end());
    if (finished) {
      b.finished = true;
      b.finish_reason = finish_reason;
      b.error = error;
    }
    dirty_ = true;
  }
  cv_.notify_all();
}

void Channel::fail(ApiError error) {
  {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(error);
    dirty_ = true;
  }
  cv_.notify_all();
}

bool Channel::take(Clock::time_point deadline, std::vector<TokenBatch>* out) {
  std::unique_lock lock(mutex_);
  cv_.wait_until(lock, deadline, [&] { return dirty_; });
  out->assign(pending_.size(), TokenBatch{});
  if (!dirty_) return false;
  for (size_t i = 0; i < pending_.size(); ++i) {
    (*out)[i] = std::move(pending_[i]);
    pending_[i] = TokenBatch{};
    pending_[i].prompt_tokens = (*out)[i].prompt_tokens;
  }
  dirty_ = false;
  return true;
}

std::optional<ApiError> Channel::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

}  // namespace rlt::server
