// Bookkeeping for carving one large reservation (a device memory slab) into aligned ranges:
// best-fit over free ranges kept sorted by offset, with neighbours merged on release. Pure host
// code with no notion of where the bytes live, so the CUDA pool is tested without a GPU.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>

#include "common/status.h"

namespace rlt {

class OffsetAllocator {
 public:
  explicit OffsetAllocator(uint64_t capacity);

  // An offset aligned to `alignment` (a power of two) with `size` bytes free behind it.
  // Errors: size 0 or a bad alignment (invalid_argument); no free range fits (resource_exhausted,
  // naming the request, what is free and the largest free range).
  Result<uint64_t> allocate(uint64_t size, uint64_t alignment = 256);
  // Returns a range handed out by allocate. Errors: an offset that is not live (double free).
  Status release(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t largest_free() const;
  size_t live_allocations() const { return live_.size(); }
  size_t free_ranges() const { return free_.size(); }

 private:
  struct Live {
    uint64_t begin;  // start of the range taken from the free list (before alignment padding)
    uint64_t end;
  };
  void insert_free(uint64_t begin, uint64_t end);

  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // begin -> end, disjoint and never adjacent
  std::map<uint64_t, Live> live_;      // aligned offset -> the range it holds
};

}  // namespace rlt
