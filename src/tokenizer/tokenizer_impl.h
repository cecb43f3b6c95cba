// The parts of a loaded tokenizer (private to the module; the streaming detokenizer reads them).
#pragma once

#include <memory>
#include <string>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace rlt::tok {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<BpeModel> model;
  AddedVocabulary added;
  PostProcessor post_processor;
  DecoderChain decoder;

  // The string HF's decode sees for `id` (added tokens first, then the model); nullptr if none.
  const std::string* token_of(int32_t id) const {
    if (const AddedToken* a = added.by_id(id)) return &a->content;
    return model->id_to_token(id);
  }
  // HF decode's filter: unknown ids always, special contents when asked.
  const std::string* decodable_token(int32_t id, bool skip_special_tokens) const {
    const std::string* t = token_of(id);
    if (t != nullptr && skip_special_tokens && added.is_special_content(*t)) return nullptr;
    return t;
  }
  bool decoder_is_byte_level_only() const {
    return decoder.present && decoder.steps.size() == 1 &&
           decoder.steps[0].kind == DecoderStep::Kind::kByteLevel;
  }
};

// Parses tokenizer.json text into the parts of a tokenizer.
Result<std::unique_ptr<Tokenizer::Impl>> load_tokenizer_json(std::string_view json_text);

}  // namespace rlt::tok
