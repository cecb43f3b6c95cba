// Post-processing (tokenizer.json "post_processor"): the special tokens wrapped around an encoded
// single sequence when add_special_tokens is true (BOS/EOS, [CLS]/[SEP]).
#pragma once

#include <cstdint>
#include <vector>

namespace rlt::tok {

// TemplateProcessing, RobertaProcessing and BertProcessing all reduce, for one sequence, to a
// template of fixed ids around the sequence; ByteLevel only trims offsets (no template).
class PostProcessor {
 public:
  struct Item {
    bool is_sequence = false;  // the encoded text ("$A")
    std::vector<int32_t> ids;  // fixed ids otherwise
  };
  using Template = std::vector<Item>;

  void add_template(Template t) { templates_.push_back(std::move(t)); }
  bool empty() const { return templates_.empty(); }

  // Applies every template in order (a Sequence processor) when add_special_tokens is set.
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const;

 private:
  std::vector<Template> templates_;
};

}  // namespace rlt::tok
