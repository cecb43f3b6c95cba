// Which token positions of one plane hold K/V (for every layer). Writes may land out of order
// (packed prefill, async banks); only the contiguous prefix [0, prefix()) is readable by
// attention. Granularity is the plane, not the layer: the runner records a position once its
// pass has written every layer (a pass writes each layer's K/V before that layer attends).
#pragma once

#include <cstdint>
#include <vector>

namespace rlt::kv {

class WrittenPlane {
 public:
  // Forget everything; positions [0, capacity) become trackable. Keeps the buffer's storage.
  void reset(int32_t capacity);
  int32_t capacity() const { return capacity_; }
  int32_t prefix() const { return prefix_; }
  bool test(int32_t pos) const { return (bits_[pos >> 6] >> (pos & 63)) & 1u; }
  // Marks [begin, end) written and advances the contiguous prefix.
  void set_range(int32_t begin, int32_t end);
  // Any position written beyond the contiguous prefix.
  bool has_pending() const;
  // Highest written position + 1 (0 when nothing is written).
  int32_t frontier() const;
  const std::vector<uint64_t>& words() const { return bits_; }
  // Installs a saved state (snapshot restore); `words` must come from a plane of equal capacity.
  void assign(int32_t capacity, const std::vector<uint64_t>& words);

 private:
  void advance_prefix();

  int32_t capacity_ = 0;
  int32_t prefix_ = 0;
  std::vector<uint64_t> bits_;
};

}  // namespace rlt::kv
