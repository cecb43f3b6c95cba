// Large zero-filled buffers straight from the kernel (anonymous mappings). The kernel hands out
// zero pages lazily, so a buffer costs resident memory only where it is written, and nothing has
// to clear it first (a memset of a fresh heap block makes the kernel zero each page and then
// writes it again: half the time of packing a model's weights went there).
#pragma once

#include <cstddef>
#include <memory>

namespace rlt {

// `bytes` zero-filled bytes, 64-byte aligned (page-aligned from the kernel's threshold up), or
// null when the system refuses. Freed when the last owner goes.
std::shared_ptr<void> allocate_zeroed(size_t bytes);

}  // namespace rlt
