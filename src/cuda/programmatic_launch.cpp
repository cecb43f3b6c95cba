#include "cuda/programmatic_launch.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace rlt::cuda {
namespace {

// A handful of streams at most; every launch asks, so the common case (none enabled) skips the
// lock.
std::mutex registry_mutex;
std::vector<CUstream_st*> enabled_streams;
std::atomic<int> enabled_count{0};

}  // namespace

void set_programmatic_launch(CUstream_st* stream, bool enabled) {
  std::lock_guard lock(registry_mutex);
  auto it = std::find(enabled_streams.begin(), enabled_streams.end(), stream);
  if (enabled && it == enabled_streams.end()) enabled_streams.push_back(stream);
  if (!enabled && it != enabled_streams.end()) enabled_streams.erase(it);
  enabled_count.store(static_cast<int>(enabled_streams.size()), std::memory_order_release);
}

bool programmatic_launch_enabled(CUstream_st* stream) {
  if (enabled_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(registry_mutex);
  return std::find(enabled_streams.begin(), enabled_streams.end(), stream) != enabled_streams.end();
}

}  // namespace rlt::cuda
