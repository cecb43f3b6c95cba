#include "common/offset_allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace rlt {

OffsetAllocator::OffsetAllocator(uint64_t capacity) : capacity_(capacity) {
  if (capacity > 0) free_.emplace(0, capacity);
}

uint64_t OffsetAllocator::largest_free() const {
  uint64_t best = 0;
  for (const auto& [begin, end] : free_) best = std::max(best, end - begin);
  return best;
}

Result<uint64_t> OffsetAllocator::allocate(uint64_t size, uint64_t alignment) {
  if (size == 0) return invalid_argument("offset allocator: a zero-byte allocation");
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return invalid_argument(
        fmt::format("offset allocator: alignment {} is not a power of two", alignment));
  }
  // Best fit: the smallest free range that holds the aligned request keeps large ranges whole
  // for the large buffers (KV pools, weights) that come later.
  auto best = free_.end();
  uint64_t best_slack = UINT64_MAX;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t aligned = (it->first + alignment - 1) & ~(alignment - 1);
    if (aligned < it->first || aligned > it->second || it->second - aligned < size) continue;
    const uint64_t slack = (it->second - it->first) - size;
    if (slack < best_slack) {
      best = it;
      best_slack = slack;
    }
  }
  if (best == free_.end()) {
    return resource_exhausted(
        fmt::format("device pool: cannot place {} bytes (alignment {}): {} of {} bytes in use, "
                    "largest free range {} bytes; "
                    "lower the batch size or the KV cache size, or give the pool more memory",
                    size, alignment, used_, capacity_, largest_free()));
  }
  const uint64_t begin = best->first, end = best->second;
  const uint64_t aligned = (begin + alignment - 1) & ~(alignment - 1);
  free_.erase(best);
  // The alignment padding stays with the allocation (returned with it), the tail goes back.
  if (aligned + size < end) free_.emplace(aligned + size, end);
  live_.emplace(aligned, Live{begin, aligned + size});
  used_ += aligned + size - begin;
  return aligned;
}

void OffsetAllocator::insert_free(uint64_t begin, uint64_t end) {
  auto next = free_.lower_bound(begin);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->second == begin) {
      begin = prev->first;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == end) {
    end = next->second;
    free_.erase(next);
  }
  free_.emplace(begin, end);
}

Status OffsetAllocator::release(uint64_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) {
    return invalid_argument(
        fmt::format("offset allocator: offset {} is not a live allocation (double free?)", offset));
  }
  const Live range = it->second;
  live_.erase(it);
  used_ -= range.end - range.begin;
  insert_free(range.begin, range.end);
  return {};
}

}  // namespace rlt
