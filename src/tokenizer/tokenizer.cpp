#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace rlt::tok {
namespace {

// Per-thread working memory of encode(), reused so steady-state encoding does not allocate
// beyond the returned vector.
struct EncodeScratch {
  std::vector<Segment> raw_segments;
  std::vector<Segment> norm_segments;
  std::string normalized;
  std::string norm_tmp;
  PieceList pieces;
  PieceList pieces_tmp;
};

EncodeScratch& encode_scratch() {
  thread_local EncodeScratch s;
  return s;
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_json_string(std::string_view json) {
  RLT_ASSIGN_OR_RETURN(auto impl, load_tokenizer_json(json));
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(fmt::format("cannot open tokenizer file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(fmt::format("cannot read tokenizer file '{}'", path));
  auto t = from_json_string(ss.str());
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

namespace {

// Encodes one normalized text segment: pre-tokenize, then run the model on every piece.
Status encode_text(const Tokenizer::Impl& impl, std::string_view text, bool at_origin,
                   EncodeScratch& s, std::vector<int32_t>& ids) {
  if (text.empty()) return Status();  // HF drops empty pieces
  PieceList& pl = s.pieces;
  pl.text.assign(text);
  pl.pieces.assign(1, Piece{0, static_cast<uint32_t>(text.size()), at_origin});
  if (impl.pre_tokenizer) impl.pre_tokenizer->pre_tokenize(pl, s.pieces_tmp);
  for (const Piece& p : pl.pieces) {
    if (!impl.model->tokenize(pl.view(p), ids)) {
      return invalid_argument(fmt::format("unk token '{}' is not in the vocabulary",
                                          impl.model->unk_token().value_or("")));
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
  const Impl& impl = *impl_;
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  if (text.size() > UINT32_MAX / 4) {
    return invalid_argument(fmt::format("text of {} bytes is too long to encode", text.size()));
  }
  EncodeScratch& s = encode_scratch();
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);

  std::vector<Segment>& raw = s.raw_segments;
  raw.clear();
  if (impl.added.has_tokens(AddedVocabulary::Pass::kRaw)) {
    impl.added.split(text, AddedVocabulary::Pass::kRaw, raw);
  } else {
    raw.push_back({0, text.size(), -1});
  }
  const bool split_normalized = impl.added.has_tokens(AddedVocabulary::Pass::kNormalized);
  for (const Segment& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
    const bool at_origin = seg.begin == 0;
    if (impl.normalizer) {
      s.normalized.assign(piece);
      impl.normalizer->normalize(s.normalized, s.norm_tmp);
      piece = s.normalized;
    }
    if (!split_normalized) {
      RLT_RETURN_IF_ERROR(encode_text(impl, piece, at_origin, s, ids));
      continue;
    }
    // `piece` and the segments live in scratch buffers encode_text() does not touch.
    std::vector<Segment>& norm = s.norm_segments;
    norm.clear();
    impl.added.split(piece, AddedVocabulary::Pass::kNormalized, norm);
    for (const Segment& ns : norm) {
      if (ns.id >= 0) {
        ids.push_back(ns.id);
        continue;
      }
      RLT_RETURN_IF_ERROR(encode_text(impl, piece.substr(ns.begin, ns.end - ns.begin),
                                      at_origin && ns.begin == 0, s, ids));
    }
  }
  impl.post_processor.process(ids, add_special_tokens);
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  if (impl.decoder_is_byte_level_only()) {
    // Fast path of the most common decoder: map every token back to bytes, repair once.
    std::string bytes;
    bytes.reserve(ids.size() * 4);
    for (int32_t id : ids) {
      if (const std::string* t = impl.decodable_token(id, skip_special_tokens)) {
        byte_level::unmap_token(*t, bytes);
      }
    }
    if (utf8::is_valid(bytes)) return bytes;
    return utf8::repair(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (const std::string* t = impl.decodable_token(id, skip_special_tokens)) tokens.push_back(*t);
  }
  return run_decoder(impl.decoder, std::move(tokens));
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const std::string* t = impl_->token_of(id)) return *t;
  return std::nullopt;
}

size_t Tokenizer::vocab_size() const {
  size_t n = impl_->model->vocab_size();
  for (const AddedToken& t : impl_->added.tokens()) {
    if (!impl_->model->token_to_id(t.content)) ++n;
  }
  return n;
}

bool Tokenizer::is_special(int32_t id) const {
  const std::string* t = impl_->token_of(id);
  return t != nullptr && impl_->added.is_special_content(*t);
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added.tokens();
}

}  // namespace rlt::tok
