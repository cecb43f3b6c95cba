#include "tokenizer/token_bytes.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace rlt::tok {

std::vector<std::optional<std::string>> token_byte_strings(const Tokenizer& tokenizer) {
  const Tokenizer::Impl& impl = tokenizer.impl();
  std::vector<std::optional<std::string>> out(tokenizer.vocab_size());
  for (size_t id = 0; id < out.size(); ++id) {
    const std::string* token = impl.token_of(static_cast<int32_t>(id));
    if (token == nullptr || impl.added.is_special_content(*token)) continue;
    if (impl.added.by_id(static_cast<int32_t>(id)) != nullptr) {
      out[id] = *token;  // a plain added token decodes to its content
      continue;
    }
    std::vector<std::string> pieces{*token};
    std::string bytes;
    bool done = false;
    for (const DecoderStep& step : impl.decoder.steps) {
      switch (step.kind) {
        case DecoderStep::Kind::kByteLevel:
          bytes.clear();
          byte_level::unmap_token(pieces[0], bytes);
          pieces[0] = bytes;
          break;
        case DecoderStep::Kind::kByteFallback:
          if (const int b = parse_byte_token(pieces[0]); b >= 0) {
            out[id] = std::string(1, static_cast<char>(b));
            done = true;
          }
          break;
        case DecoderStep::Kind::kMetaspace: {
          std::string replaced;
          const std::string_view from = "\xE2\x96\x81";  // ▁
          for (size_t i = 0; i < pieces[0].size();) {
            if (pieces[0].compare(i, from.size(), from) == 0) {
              replaced += ' ';
              i += from.size();
            } else {
              replaced += pieces[0][i++];
            }
          }
          pieces[0] = replaced;
          break;
        }
        case DecoderStep::Kind::kReplace:
          apply_decoder_step(step, pieces);
          break;
        case DecoderStep::Kind::kFuse:
        case DecoderStep::Kind::kStrip:
          break;  // whole-text steps
      }
      if (done) break;
    }
    if (!done) out[id] = pieces[0];
  }
  return out;
}

}  // namespace rlt::tok
