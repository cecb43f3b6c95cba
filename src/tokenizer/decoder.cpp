#include "tokenizer/decoder.h"

#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"

namespace rlt::tok {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void byte_level_chain(std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& t : tokens) byte_level::unmap_token(t, bytes);
  tokens.assign(1, utf8::repair(bytes));
}

void metaspace_chain(const DecoderStep& step, std::vector<std::string>& tokens) {
  const std::string rep = utf8::encode(step.ch);
  for (size_t i = 0; i < tokens.size(); ++i) {
    // HF drops every replacement character of the first token (not just a leading one).
    const bool drop = i == 0 && step.scheme != PrependScheme::kNever;
    std::string out;
    const std::string& t = tokens[i];
    size_t pos = 0;
    while (pos < t.size()) {
      if (t.compare(pos, rep.size(), rep) == 0) {
        if (!drop) out.push_back(' ');
        pos += rep.size();
      } else {
        out.push_back(t[pos++]);
      }
    }
    tokens[i] = std::move(out);
  }
}

void byte_fallback_chain(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;  // bytes of the current run of byte tokens
  size_t pending_count = 0;
  auto flush = [&] {
    if (pending_count == 0) return;
    if (utf8::is_valid(pending)) {
      out.push_back(pending);
    } else {
      // An invalid run becomes one U+FFFD per byte token (not per maximal subpart).
      for (size_t k = 0; k < pending_count; ++k) out.emplace_back(utf8::kReplacementUtf8);
    }
    pending.clear();
    pending_count = 0;
  };
  for (std::string& t : tokens) {
    const int b = parse_byte_token(t);
    if (b >= 0) {
      pending.push_back(static_cast<char>(b));
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  tokens.swap(out);
}

}  // namespace

int parse_byte_token(std::string_view t) {
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  const int hi = hex_value(t[3]);
  const int lo = hex_value(t[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

std::string strip_token(std::string_view token, char32_t ch, size_t start, size_t stop) {
  std::vector<size_t> offsets;  // byte offset of each character
  std::vector<char32_t> chars;
  size_t i = 0;
  while (i < token.size()) {
    char32_t cp = 0;
    offsets.push_back(i);
    i += utf8::decode(token, i, cp);
    chars.push_back(cp);
  }
  size_t start_cut = 0;
  for (size_t k = 0; k < chars.size() && k < start && chars[k] == ch; ++k) start_cut = k + 1;
  size_t stop_cut = chars.size();
  // HF panics when the two cuts overlap; rlt clamps (the token becomes empty).
  for (size_t k = 0; k < stop && stop_cut > start_cut && chars[stop_cut - 1] == ch; ++k) {
    --stop_cut;
  }
  const size_t b = start_cut < chars.size() ? offsets[start_cut] : token.size();
  const size_t e = stop_cut < chars.size() ? offsets[stop_cut] : token.size();
  return std::string(token.substr(b, e > b ? e - b : 0));
}

void apply_decoder_step(const DecoderStep& step, std::vector<std::string>& tokens) {
  switch (step.kind) {
    case DecoderStep::Kind::kByteLevel:
      byte_level_chain(tokens);
      break;
    case DecoderStep::Kind::kMetaspace:
      metaspace_chain(step, tokens);
      break;
    case DecoderStep::Kind::kByteFallback:
      byte_fallback_chain(tokens);
      break;
    case DecoderStep::Kind::kFuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case DecoderStep::Kind::kStrip:
      for (std::string& t : tokens) t = strip_token(t, step.ch, step.start, step.stop);
      break;
    case DecoderStep::Kind::kReplace: {
      std::string out;
      for (std::string& t : tokens) {
        replace_all(*step.pattern, step.content, t, out);
        t.swap(out);
      }
      break;
    }
  }
}

std::string run_decoder(const DecoderChain& chain, std::vector<std::string> tokens) {
  std::string out;
  if (!chain.present) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  for (const DecoderStep& step : chain.steps) apply_decoder_step(step, tokens);
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace rlt::tok
