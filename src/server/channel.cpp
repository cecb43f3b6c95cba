#include "server/channel.h"

namespace rlt::server {

void Channel::push(size_t choice, RequestOutput o) {
  {
    std::lock_guard lock(mutex_);
    TokenBatch& b = pending_.at(choice);
    b.prompt_tokens = o.prompt_tokens;
    auto append = [](auto& to, auto& from) {
      if (to.empty()) {
        to = std::move(from);
      } else {
        to.insert(to.end(), std::make_move_iterator(from.begin()),
                  std::make_move_iterator(from.end()));
      }
    };
    append(b.tokens, o.new_token_ids);
    append(b.exit_depths, o.new_exit_depths);
    append(b.logprobs, o.new_logprobs);
    append(b.prompt_logprobs, o.prompt_logprobs);
    append(b.texts, o.new_token_texts);
    if (o.finished) {
      b.finished = true;
      b.final_text = std::move(o.final_text);
      b.finish_reason = std::move(o.finish_reason);
      b.error = std::move(o.error);
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
