#include "tokenizer/decode_stream.h"

#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_impl.h"

namespace rlt::tok {

// One decoder step run incrementally. In token mode every input item is a whole token; after a
// step that fuses tokens (ByteLevel, Fuse) the rest of the chain sees the whole output as ONE
// token that arrives in fragments ("fused mode"). Each stage emits exactly the token list of the
// batch step (token mode) or fragments whose concatenation is the batch step's single token.
class IncrementalDetokenizer::Stage {
 public:
  virtual ~Stage() = default;
  virtual void push(std::string item, std::vector<std::string>& out) = 0;
  virtual void finish(std::vector<std::string>& out) = 0;
};

namespace {

using Stage = IncrementalDetokenizer::Stage;

// Fused-mode fallback for steps that need the whole token: buffer until the end.
class WholeTokenStage final : public Stage {
 public:
  explicit WholeTokenStage(const DecoderStep& step) : step_(step) {}
  void push(std::string item, std::vector<std::string>&) override { buf_ += item; }
  void finish(std::vector<std::string>& out) override {
    std::vector<std::string> tokens{std::move(buf_)};
    apply_decoder_step(step_, tokens);
    for (auto& t : tokens) out.push_back(std::move(t));
    buf_.clear();
  }

 private:
  const DecoderStep& step_;
  std::string buf_;
};

class ByteLevelStage final : public Stage {
 public:
  void push(std::string token, std::vector<std::string>& out) override {
    bytes_.clear();
    byte_level::unmap_token(token, bytes_);
    std::string text;
    decoder_.push(bytes_, text);
    if (!text.empty()) out.push_back(std::move(text));
  }
  void finish(std::vector<std::string>& out) override {
    std::string text;
    decoder_.finish(text);
    if (!text.empty()) out.push_back(std::move(text));
  }

 private:
  utf8::LossyDecoder decoder_;
  std::string bytes_;
};

class FuseStage final : public Stage {
 public:
  void push(std::string token, std::vector<std::string>& out) override {
    out.push_back(std::move(token));
  }
  void finish(std::vector<std::string>&) override {}
};

// A run of byte tokens decodes as a whole (valid UTF-8, or one U+FFFD per byte token), so the
// run is held until a non-byte token or the end arrives.
class ByteFallbackStage final : public Stage {
 public:
  void push(std::string token, std::vector<std::string>& out) override {
    const int b = parse_byte_token(token);
    if (b >= 0) {
      pending_.push_back(static_cast<char>(b));
      ++count_;
      return;
    }
    finish(out);
    out.push_back(std::move(token));
  }
  void finish(std::vector<std::string>& out) override {
    if (count_ == 0) return;
    if (utf8::is_valid(pending_)) {
      out.push_back(pending_);
    } else {
      for (size_t k = 0; k < count_; ++k) out.emplace_back(utf8::kReplacementUtf8);
    }
    pending_.clear();
    count_ = 0;
  }

 private:
  std::string pending_;
  size_t count_ = 0;
};

class MetaspaceStage final : public Stage {
 public:
  MetaspaceStage(const DecoderStep& step, bool fused) : step_(step), fused_(fused) {}
  void push(std::string token, std::vector<std::string>& out) override {
    std::vector<std::string> one{std::move(token)};
    if (fused_ || index_ == 0) {
      apply_decoder_step(step_, one);  // the (single) token at index 0
    } else {
      // Later tokens: every replacement character becomes a space.
      DecoderStep never = step_;
      never.scheme = PrependScheme::kNever;
      apply_decoder_step(never, one);
    }
    ++index_;
    out.push_back(std::move(one[0]));
  }
  void finish(std::vector<std::string>&) override {}

 private:
  const DecoderStep& step_;
  bool fused_;
  size_t index_ = 0;
};

class StripTokenStage final : public Stage {
 public:
  explicit StripTokenStage(const DecoderStep& step) : step_(step) {}
  void push(std::string token, std::vector<std::string>& out) override {
    out.push_back(strip_token(token, step_.ch, step_.start, step_.stop));
  }
  void finish(std::vector<std::string>&) override {}

 private:
  const DecoderStep& step_;
};

// Strip over the single fused token: drop up to `start` leading characters, and hold back the
// trailing run of the stripped character until something else follows it (or the end, where
// up to `stop` of them are dropped).
class StripFusedStage final : public Stage {
 public:
  explicit StripFusedStage(const DecoderStep& step) : step_(step), ch_(utf8::encode(step.ch)) {}
  void push(std::string text, std::vector<std::string>& out) override {
    std::string emit;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = utf8::seq_len(static_cast<unsigned char>(text[i]));
      const bool is_ch = text.compare(i, n, ch_) == 0;
      if (at_start_ && is_ch && stripped_ < step_.start) {
        ++stripped_;
      } else if (is_ch) {
        at_start_ = false;
        ++held_;
      } else {
        at_start_ = false;
        for (; held_ > 0; --held_) emit += ch_;
        emit.append(text, i, n);
      }
      i += n;
    }
    if (!emit.empty()) out.push_back(std::move(emit));
  }
  void finish(std::vector<std::string>& out) override {
    const size_t keep = held_ > step_.stop ? held_ - step_.stop : 0;
    std::string emit;
    for (size_t k = 0; k < keep; ++k) emit += ch_;
    if (!emit.empty()) out.push_back(std::move(emit));
    held_ = 0;
  }

 private:
  const DecoderStep& step_;
  std::string ch_;
  bool at_start_ = true;
  size_t stripped_ = 0;
  size_t held_ = 0;
};

class ReplaceTokenStage final : public Stage {
 public:
  explicit ReplaceTokenStage(const DecoderStep& step) : step_(step) {}
  void push(std::string token, std::vector<std::string>& out) override {
    std::vector<std::string> one{std::move(token)};
    apply_decoder_step(step_, one);
    out.push_back(std::move(one[0]));
  }
  void finish(std::vector<std::string>&) override {}

 private:
  const DecoderStep& step_;
};

// Literal replacement over the fused token: leftmost non-overlapping matches, holding back a
// suffix that could still be the start of a match.
class ReplaceFusedStage final : public Stage {
 public:
  ReplaceFusedStage(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void push(std::string text, std::vector<std::string>& out) override {
    buf_ += text;
    std::string emit;
    size_t pos = 0;
    while (true) {
      const size_t m = buf_.find(pattern_, pos);
      if (m == std::string::npos) break;
      emit.append(buf_, pos, m - pos);
      emit += content_;
      pos = m + pattern_.size();
    }
    // Keep the longest suffix that is a proper prefix of the pattern.
    size_t keep = std::min(pattern_.size() - 1, buf_.size() - pos);
    while (keep > 0 && buf_.compare(buf_.size() - keep, keep, pattern_, 0, keep) != 0) --keep;
    emit.append(buf_, pos, buf_.size() - keep - pos);
    buf_.erase(0, buf_.size() - keep);
    if (!emit.empty()) out.push_back(std::move(emit));
  }
  void finish(std::vector<std::string>& out) override {
    if (!buf_.empty()) out.push_back(std::move(buf_));
    buf_.clear();
  }

 private:
  std::string pattern_;
  std::string content_;
  std::string buf_;
};

// No decoder: HF joins the tokens with single spaces.
class JoinWithSpacesStage final : public Stage {
 public:
  void push(std::string token, std::vector<std::string>& out) override {
    if (!first_) token.insert(token.begin(), ' ');
    first_ = false;
    out.push_back(std::move(token));
  }
  void finish(std::vector<std::string>&) override {}

 private:
  bool first_ = true;
};

std::unique_ptr<Stage> make_stage(const DecoderStep& step, bool& fused) {
  using Kind = DecoderStep::Kind;
  switch (step.kind) {
    case Kind::kByteLevel:
      if (fused) return std::make_unique<WholeTokenStage>(step);
      fused = true;
      return std::make_unique<ByteLevelStage>();
    case Kind::kFuse:
      fused = true;
      return std::make_unique<FuseStage>();
    case Kind::kByteFallback:
      if (fused) return std::make_unique<WholeTokenStage>(step);
      return std::make_unique<ByteFallbackStage>();
    case Kind::kMetaspace:
      return std::make_unique<MetaspaceStage>(step, fused);
    case Kind::kStrip:
      if (!fused) return std::make_unique<StripTokenStage>(step);
      return std::make_unique<StripFusedStage>(step);
    case Kind::kReplace:
      if (!fused) return std::make_unique<ReplaceTokenStage>(step);
      if (step.literal && !step.literal->empty()) {
        return std::make_unique<ReplaceFusedStage>(*step.literal, step.content);
      }
      return std::make_unique<WholeTokenStage>(step);
  }
  return std::make_unique<WholeTokenStage>(step);
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {
  reset();
}

IncrementalDetokenizer::~IncrementalDetokenizer() = default;
IncrementalDetokenizer::IncrementalDetokenizer(IncrementalDetokenizer&&) noexcept = default;
IncrementalDetokenizer& IncrementalDetokenizer::operator=(IncrementalDetokenizer&&) noexcept =
    default;

void IncrementalDetokenizer::reset() {
  stages_.clear();
  const DecoderChain& chain = tokenizer_->impl().decoder;
  if (!chain.present) {
    stages_.push_back(std::make_unique<JoinWithSpacesStage>());
    return;
  }
  bool fused = false;
  for (const DecoderStep& step : chain.steps) stages_.push_back(make_stage(step, fused));
}

// Feeds `items` to stages_[first_stage] and everything it emits down the chain.
void IncrementalDetokenizer::run(size_t first_stage, std::vector<std::string>& items,
                                 std::string& out) {
  std::vector<std::string> next;
  for (size_t s = first_stage; s < stages_.size(); ++s) {
    next.clear();
    for (std::string& item : items) stages_[s]->push(std::move(item), next);
    items.swap(next);
  }
  for (const std::string& item : items) out += item;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  const std::string* token = tokenizer_->impl().decodable_token(id, skip_special_tokens_);
  std::string out;
  if (token == nullptr) return out;
  std::vector<std::string> items{*token};
  run(0, items, out);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    std::vector<std::string> items;
    stages_[s]->finish(items);
    run(s + 1, items, out);
  }
  reset();
  return out;
}

}  // namespace rlt::tok
