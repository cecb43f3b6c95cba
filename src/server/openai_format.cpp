#include "server/openai_format.h"

#include <fmt/format.h>
#include <random>

namespace rlt::server {
namespace {

// The token's own text for logprobs (specials included, so every entry names its token).
std::string token_text(const tok::Tokenizer& tokenizer, int32_t id) {
  const int32_t ids[1] = {id};
  auto text = tokenizer.decode(ids, /*skip_special_tokens=*/false);
  return text.ok() ? *text : std::string();
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

json chat_logprob_entry(const tok::Tokenizer& tokenizer, const TokenLogprobs& lp) {
  const std::string text = token_text(tokenizer, lp.token);
  json top = json::array();
  for (const TokenLogprob& t : lp.top) {
    const std::string tt = token_text(tokenizer, t.token);
    top.push_back({{"token", tt}, {"logprob", t.logprob}, {"bytes", bytes_of(tt)}});
  }
  return {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", std::move(top)}};
}

// Legacy completions logprobs: parallel lists over the tokens.
json completion_logprobs(const tok::Tokenizer& tokenizer, const std::vector<TokenLogprobs>& lps,
                         const std::vector<size_t>& offsets) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), text_offset = json::array();
  for (size_t i = 0; i < lps.size(); ++i) {
    const TokenLogprobs& lp = lps[i];
    tokens.push_back(token_text(tokenizer, lp.token));
    token_logprobs.push_back(lp.logprob);
    json alternatives = json::object();
    alternatives[token_text(tokenizer, lp.token)] = lp.logprob;
    for (const TokenLogprob& t : lp.top) {
      const std::string tt = token_text(tokenizer, t.token);
      if (!alternatives.contains(tt)) alternatives[tt] = t.logprob;
    }
    top.push_back(std::move(alternatives));
    text_offset.push_back(i < offsets.size() ? offsets[i] : 0);
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)}, {"top_logprobs", std::move(top)},
          {"text_offset", std::move(text_offset)}};
}

json finish_value(const TokenPiece& p) { return p.last ? json(p.finish_reason) : json(); }

json header(const ResponseMeta& meta, const char* object) {
  json j;
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created;
  j["model"] = meta.model;
  return j;
}

}  // namespace

std::string make_response_id(Endpoint endpoint) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}-{:016x}{:016x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", rng(), rng());
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json final_response(const ResponseMeta& meta, const std::vector<ChoiceDecoder>& choices,
                    const tok::Tokenizer& tokenizer) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  json j = header(meta, chat ? "chat.completion" : "text_completion");
  json list = json::array();
  int64_t prompt = 0, completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceDecoder& c = choices[i];
    prompt += c.prompt_tokens();
    completion += c.completion_tokens();
    json choice;
    choice["index"] = i;
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text()}};
      if (meta.logprobs) {
        json content = json::array();
        for (const TokenLogprobs& lp : c.logprobs()) content.push_back(chat_logprob_entry(tokenizer, lp));
        choice["logprobs"] = {{"content", std::move(content)}};
      } else {
        choice["logprobs"] = nullptr;
      }
    } else {
      choice["text"] = c.text();
      if (meta.logprobs) {
        choice["logprobs"] = completion_logprobs(tokenizer, c.logprobs(), c.text_offsets());
      } else {
        choice["logprobs"] = nullptr;
      }
    }
    choice["finish_reason"] = c.finish_reason();
    choice["token_ids"] = c.tokens();
    choice["exit_depths"] = c.exit_depths();
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(prompt, completion);
  return j;
}

json chat_role_chunk(const ResponseMeta& meta, size_t index) {
  json j = header(meta, "chat.completion.chunk");
  json choice;
  choice["index"] = index;
  choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  j["choices"] = json::array({std::move(choice)});
  if (meta.include_usage) j["usage"] = nullptr;
  return j;
}

json token_chunk(const ResponseMeta& meta, size_t index, const TokenPiece& piece, const tok::Tokenizer& tokenizer) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  json j = header(meta, chat ? "chat.completion.chunk" : "text_completion");
  json choice;
  choice["index"] = index;
  const bool has_token = piece.token >= 0;
  if (chat) {
    choice["delta"] = (has_token || !piece.text.empty()) ? json{{"content", piece.text}} : json::object();
  } else {
    choice["text"] = piece.text;
  }
  if (meta.logprobs && piece.logprobs) {
    if (chat) {
      choice["logprobs"] = {{"content", json::array({chat_logprob_entry(tokenizer, *piece.logprobs)})}};
    } else {
      choice["logprobs"] = completion_logprobs(tokenizer, {*piece.logprobs}, {piece.text_offset});
    }
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = finish_value(piece);
  choice["token_ids"] = has_token ? json::array({piece.token}) : json::array();
  choice["exit_depths"] = has_token ? json::array({piece.exit_depth}) : json::array();
  j["choices"] = json::array({std::move(choice)});
  if (meta.include_usage) j["usage"] = nullptr;
  return j;
}

json usage_chunk(const ResponseMeta& meta, int64_t prompt_tokens, int64_t completion_tokens) {
  json j = header(meta, meta.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = json::array();
  j["usage"] = usage_json(prompt_tokens, completion_tokens);
  return j;
}

std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& chunk) { return "data: " + dump_json(chunk) + "\n\n"; }

}  // namespace rlt::server
