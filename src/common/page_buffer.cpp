#include "common/page_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

namespace rlt {
namespace {

// Below this a heap block is cheaper than a mapping of its own (one system call and one kernel
// memory area per buffer; tests build thousands of tiny matrices).
constexpr size_t kMappingThreshold = size_t{1} << 20;

}  // namespace

std::shared_ptr<void> allocate_zeroed(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes < kMappingThreshold) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) return nullptr;
    std::memset(p, 0, rounded);
    return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
}

}  // namespace rlt
