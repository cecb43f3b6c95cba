#include "tokenizer/post_processor.h"

namespace rlt::tok {

void PostProcessor::process(std::vector<int32_t>& ids, bool add_special_tokens) const {
  if (!add_special_tokens) return;
  for (const Template& t : templates_) {
    std::vector<int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Item& item : t) {
      if (item.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    ids.swap(out);
  }
}

}  // namespace rlt::tok
