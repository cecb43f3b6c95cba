#include "server/stop_matcher.h"

#include <algorithm>

namespace rlt::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Result StopMatcher::feed(std::string_view piece) {
  Result r;
  if (stopped_) return r;
  held_.append(piece);
  if (stops_.empty()) {
    r.text.swap(held_);
    return r;
  }
  // The earliest match wins (ties: the first stop string listed).
  size_t best = std::string::npos;
  for (const std::string& s : stops_) best = std::min(best, held_.find(s));
  if (best != std::string::npos) {
    r.text = held_.substr(0, best);
    r.stopped = stopped_ = true;
    held_.clear();
    return r;
  }
  // Hold the longest tail that is a proper prefix of some stop string. Every earlier position
  // was ruled out: a match starting there would be a longer such tail.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  r.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace rlt::server
