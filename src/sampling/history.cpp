#include "sampling/history.h"

namespace rlt::sampling {

void TokenHistory::note_seen(int32_t token) {
  if (seen_.insert(token).second) distinct_.push_back(token);
}

void TokenHistory::add_prompt(std::span<const int32_t> prompt) {
  for (int32_t token : prompt) note_seen(token);
}

void TokenHistory::append(int32_t token) {
  note_seen(token);
  auto [it, inserted] = generated_slot_.try_emplace(token, generated_.size());
  if (inserted) {
    generated_.push_back(token);
    generated_counts_.push_back(0);
  }
  ++generated_counts_[it->second];
  ++num_generated_;
}

}  // namespace rlt::sampling
