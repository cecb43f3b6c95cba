#include "kv/written_state.h"

#include <algorithm>
#include <bit>
#include <cassert>

namespace rlt::kv {

void WrittenPlane::reset(int32_t capacity) {
  capacity_ = capacity;
  prefix_ = 0;
  bits_.assign((static_cast<size_t>(capacity) + 63) / 64, 0);
}

void WrittenPlane::set_range(int32_t begin, int32_t end) {
  assert(0 <= begin && begin <= end && end <= capacity_);
  for (int32_t pos = begin; pos < end;) {
    int32_t word = pos >> 6, bit = pos & 63;
    int32_t n = std::min(64 - bit, end - pos);
    uint64_t mask = (n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1)) << bit;
    bits_[word] |= mask;
    pos += n;
  }
  if (begin <= prefix_) advance_prefix();
}

void WrittenPlane::advance_prefix() {
  while (prefix_ < capacity_) {
    uint64_t rest = ~bits_[prefix_ >> 6] >> (prefix_ & 63);
    if (rest == 0) {
      prefix_ = std::min(capacity_, (prefix_ | 63) + 1);  // rest of this word is written
      continue;
    }
    prefix_ = std::min(capacity_, prefix_ + std::countr_zero(rest));
    break;
  }
}

bool WrittenPlane::has_pending() const {
  return frontier() > prefix_;
}

int32_t WrittenPlane::frontier() const {
  for (size_t w = bits_.size(); w-- > 0;) {
    if (bits_[w] != 0) return static_cast<int32_t>(w * 64 + 64 - std::countl_zero(bits_[w]));
  }
  return 0;
}

void WrittenPlane::assign(int32_t capacity, const std::vector<uint64_t>& words) {
  assert(words.size() == (static_cast<size_t>(capacity) + 63) / 64);
  capacity_ = capacity;
  bits_ = words;
  prefix_ = 0;
  advance_prefix();
}

}  // namespace rlt::kv
