#include "server/choice_decoder.h"

namespace rlt::server {

ChoiceDecoder::ChoiceDecoder(std::vector<std::string> stops, bool prompt_only)
    : matcher_(std::move(stops)), prompt_only_(prompt_only) {}

std::vector<TokenPiece> ChoiceDecoder::consume(const TokenBatch& batch) {
  std::vector<TokenPiece> pieces;
  if (finished_) return pieces;
  prompt_tokens_ = batch.prompt_tokens;
  if (!batch.prompt_logprobs.empty()) prompt_logprobs_ = batch.prompt_logprobs;
  if (prompt_only_) {
    if (batch.finished) {
      TokenPiece p;
      p.last = true;
      p.finish_reason = batch.finish_reason == "abort" ? "abort" : "length";
      finished_ = true;
      finish_reason_ = p.finish_reason;
      if (finish_reason_ == "abort") engine_error_ = batch.error;
      pieces.push_back(std::move(p));
    }
    return pieces;
  }
  auto finish = [&](TokenPiece& p, const std::string& reason) {
    if (!matcher_.stopped()) {
      p.text += matcher_.feed(batch.final_text).text;
      p.text += matcher_.finish();
    }
    p.last = true;
    p.finish_reason = matcher_.stopped() ? "stop" : reason;
    finished_ = true;
    finish_reason_ = p.finish_reason;
    if (finish_reason_ == "abort") engine_error_ = batch.error;
  };
  for (size_t k = 0; k < batch.tokens.size() && !finished_; ++k) {
    TokenPiece p;
    p.token = batch.tokens[k];
    p.exit_depth = k < batch.exit_depths.size() ? batch.exit_depths[k] : 0;
    if (k < batch.logprobs.size()) p.logprobs = batch.logprobs[k];
    StopMatcher::Result r = matcher_.feed(k < batch.texts.size() ? batch.texts[k] : std::string());
    p.text = std::move(r.text);
    if (r.stopped) finish(p, "stop");
    else if (batch.finished && k + 1 == batch.tokens.size()) finish(p, batch.finish_reason);
    p.text_offset = text_.size();
    text_offsets_.push_back(p.text_offset);
    tokens_.push_back(p.token);
    exit_depths_.push_back(p.exit_depth);
    if (p.logprobs) logprobs_.push_back(*p.logprobs);
    text_ += p.text;
    pieces.push_back(std::move(p));
  }
  if (!finished_ && batch.finished) {
    TokenPiece p;
    finish(p, batch.finish_reason);
    p.text_offset = text_.size();
    text_ += p.text;
    pieces.push_back(std::move(p));
  }
  return pieces;
}

}  // namespace rlt::server
