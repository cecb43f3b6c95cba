#include "server/openai_format.h"

#include <fmt/format.h>
#include <algorithm>
#include <numeric>
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

// Legacy completions logprobs: parallel lists over the tokens (echoed prompt tokens first).
class LegacyLogprobs {
 public:
  LegacyLogprobs(const tok::Tokenizer& tokenizer, int top) : tokenizer_(tokenizer), top_(top) {}

  // A scored token at `offset` in the choice's text; `lp` null for a prompt's first token.
  void add(int32_t token, const TokenLogprobs* lp, size_t offset) {
    const std::string text = token_text(tokenizer_, token);
    tokens_.push_back(text);
    text_offset_.push_back(offset);
    if (lp == nullptr) {
      token_logprobs_.push_back(nullptr);
      top_logprobs_.push_back(nullptr);
      return;
    }
    token_logprobs_.push_back(lp->logprob);
    json alternatives = json::object();
    alternatives[text] = lp->logprob;
    const size_t n = std::min(lp->top.size(), static_cast<size_t>(std::max(top_, 0)));
    for (size_t i = 0; i < n; ++i) {
      const std::string tt = token_text(tokenizer_, lp->top[i].token);
      if (!alternatives.contains(tt)) alternatives[tt] = lp->top[i].logprob;
    }
    top_logprobs_.push_back(std::move(alternatives));
  }

  // The echoed prompt: its first token unscored, the others with their prompt logprobs; offsets
  // (bytes) are the running sum of the tokens' texts.
  void add_prompt(const PromptEcho& echo, const std::vector<TokenLogprobs>& scored) {
    size_t offset = 0;
    for (size_t i = 0; i < echo.ids.size(); ++i) {
      const TokenLogprobs* lp = i > 0 && i - 1 < scored.size() ? &scored[i - 1] : nullptr;
      // Clamped to the echoed text, where the completion's offsets start: a token's own text
      // may be longer than what it adds to the prompt (an added BOS, a partial UTF-8 byte).
      add(echo.ids[i], lp, std::min(offset, echo.text.size()));
      offset += token_text(tokenizer_, echo.ids[i]).size();
    }
  }

  json to_json() {
    return {{"tokens", std::move(tokens_)}, {"token_logprobs", std::move(token_logprobs_)},
            {"top_logprobs", std::move(top_logprobs_)}, {"text_offset", std::move(text_offset_)}};
  }

 private:
  const tok::Tokenizer& tokenizer_;
  int top_;
  json tokens_ = json::array(), token_logprobs_ = json::array(), top_logprobs_ = json::array(),
       text_offset_ = json::array();
};

// vLLM's prompt_logprobs: null for the first token, then per token a map from token id to its
// logprob, rank and text (the token itself and the top `top` alternatives).
json vllm_prompt_logprobs(const tok::Tokenizer& tokenizer, const std::vector<TokenLogprobs>& scored, int top) {
  json list = json::array({nullptr});
  for (const TokenLogprobs& lp : scored) {
    json entry = json::object();
    entry[std::to_string(lp.token)] = {{"logprob", lp.logprob}, {"rank", lp.rank},
                                       {"decoded_token", token_text(tokenizer, lp.token)}};
    const size_t n = std::min(lp.top.size(), static_cast<size_t>(std::max(top, 0)));
    for (size_t i = 0; i < n; ++i) {
      const std::string key = std::to_string(lp.top[i].token);
      if (entry.contains(key)) continue;
      entry[key] = {{"logprob", lp.top[i].logprob}, {"rank", static_cast<int64_t>(i + 1)},
                    {"decoded_token", token_text(tokenizer, lp.top[i].token)}};
    }
    list.push_back(std::move(entry));
  }
  return list;
}

// Where a completion choice's generated text starts in the returned text (after its echo).
size_t echo_length(const ResponseMeta& meta, size_t index) {
  return index < meta.echoes.size() ? meta.echoes[index].text.size() : 0;
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

namespace {

std::string make_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

json tool_call_json(const ParsedToolCall& call) {
  return {{"id", make_call_id()}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// The assistant message of a chat choice; with tools, its <tool_call> blocks become tool_calls
// (content null when nothing else was said) and a "stop" finish becomes "tool_calls".
// With a reasoning parser, the <think> block goes to reasoning_content first (null content when
// the model never got past it), and tool calls are looked for in the rest.
json chat_message(const ResponseMeta& meta, const std::string& whole, std::string* finish) {
  json message = {{"role", "assistant"}};
  std::string text = whole;
  bool reasoned = false;
  if (meta.reasoning != ReasoningFormat::kNone) {
    ReasoningSplitter splitter(meta.reasoning);
    ReasoningSplitter::Delta split = splitter.push(whole, /*last=*/true);
    reasoned = splitter.reasoned();
    message["reasoning_content"] = reasoned ? json(split.reasoning) : json();
    text = std::move(split.content);
  }
  if (!meta.tool_calls) {
    message["content"] = reasoned && text.empty() ? json() : json(text);
    return message;
  }
  ParsedOutput parsed = parse_tool_calls(text);
  if (parsed.calls.empty()) {
    message["content"] = reasoned && parsed.content.empty() ? json() : json(parsed.content);
    return message;
  }
  json calls = json::array();
  for (const ParsedToolCall& call : parsed.calls) calls.push_back(tool_call_json(call));
  if (*finish == "stop") *finish = "tool_calls";
  message["content"] = parsed.content.empty() ? json() : json(parsed.content);
  message["tool_calls"] = std::move(calls);
  return message;
}

}  // namespace

json tool_call_chunk(const ResponseMeta& meta, size_t index, size_t call_index, const ParsedToolCall& call) {
  json j = header(meta, "chat.completion.chunk");
  json c = tool_call_json(call);
  c["index"] = call_index;
  json choice;
  choice["index"] = index;
  choice["delta"] = {{"tool_calls", json::array({std::move(c)})}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  j["choices"] = json::array({std::move(choice)});
  if (meta.include_usage) j["usage"] = nullptr;
  return j;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

std::vector<size_t> returned_choices(const ResponseMeta& meta, const std::vector<ChoiceDecoder>& choices) {
  std::vector<size_t> order(choices.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const auto copies = static_cast<size_t>(std::max(meta.copies, 1));
  const auto n = static_cast<size_t>(std::max(meta.n, 1));
  if (copies <= n) return order;
  auto score = [&](size_t k) {
    double sum = 0.0;
    for (const TokenLogprobs& lp : choices[k].logprobs()) sum += lp.logprob;
    return sum;
  };
  std::vector<size_t> out;
  for (size_t group = 0; group * copies < choices.size(); ++group) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(group * copies);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(std::min(choices.size(), (group + 1) * copies));
    std::stable_sort(first, last, [&](size_t a, size_t b) { return score(a) > score(b); });
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(std::min<size_t>(n, last - first)));
  }
  return out;
}

json final_response(const ResponseMeta& meta, const std::vector<ChoiceDecoder>& choices,
                    const tok::Tokenizer& tokenizer) {
  const bool chat = meta.endpoint == Endpoint::kChat;
  json j = header(meta, chat ? "chat.completion" : "text_completion");
  json list = json::array();
  int64_t prompt = 0, completion = 0;
  const auto copies = static_cast<size_t>(std::max(meta.copies, 1));
  for (size_t k = 0; k < choices.size(); ++k) {
    if (k % copies == 0) prompt += choices[k].prompt_tokens();
    completion += choices[k].completion_tokens();
  }
  const std::vector<size_t> returned = returned_choices(meta, choices);
  for (size_t index = 0; index < returned.size(); ++index) {
    const size_t i = returned[index];
    const ChoiceDecoder& c = choices[i];
    json choice;
    choice["index"] = index;
    std::string finish = c.finish_reason();
    if (chat) {
      choice["message"] = chat_message(meta, c.text(), &finish);
      if (meta.logprobs) {
        json content = json::array();
        for (const TokenLogprobs& lp : c.logprobs()) content.push_back(chat_logprob_entry(tokenizer, lp));
        choice["logprobs"] = {{"content", std::move(content)}};
      } else {
        choice["logprobs"] = nullptr;
      }
    } else {
      const size_t base = echo_length(meta, i);
      choice["text"] = i < meta.echoes.size() ? meta.echoes[i].text + c.text() : c.text();
      if (meta.logprobs) {
        LegacyLogprobs lists(tokenizer, meta.top_logprobs);
        if (i < meta.echoes.size()) lists.add_prompt(meta.echoes[i], c.prompt_logprobs());
        for (size_t t = 0; t < c.logprobs().size(); ++t) {
          lists.add(c.logprobs()[t].token, &c.logprobs()[t],
                    base + (t < c.text_offsets().size() ? c.text_offsets()[t] : 0));
        }
        choice["logprobs"] = lists.to_json();
      } else {
        choice["logprobs"] = nullptr;
      }
      if (meta.prompt_logprobs)
        choice["prompt_logprobs"] = vllm_prompt_logprobs(tokenizer, c.prompt_logprobs(), *meta.prompt_logprobs);
    }
    choice["finish_reason"] = finish;
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
    json delta = json::object();
    if (!piece.reasoning.empty()) delta["reasoning_content"] = piece.reasoning;
    if (!piece.text.empty() || (has_token && piece.reasoning.empty())) delta["content"] = piece.text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = piece.text;
  }
  if (meta.logprobs && piece.logprobs) {
    if (chat) {
      choice["logprobs"] = {{"content", json::array({chat_logprob_entry(tokenizer, *piece.logprobs)})}};
    } else {
      LegacyLogprobs lists(tokenizer, meta.top_logprobs);
      lists.add(piece.logprobs->token, &*piece.logprobs, echo_length(meta, index) + piece.text_offset);
      choice["logprobs"] = lists.to_json();
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

json prompt_chunk(const ResponseMeta& meta, size_t index, const ChoiceDecoder& c, const tok::Tokenizer& tokenizer) {
  json j = header(meta, "text_completion");
  json choice;
  choice["index"] = index;
  const bool echo = index < meta.echoes.size();
  choice["text"] = echo ? meta.echoes[index].text : std::string();
  if (meta.logprobs && echo) {
    LegacyLogprobs lists(tokenizer, meta.top_logprobs);
    lists.add_prompt(meta.echoes[index], c.prompt_logprobs());
    choice["logprobs"] = lists.to_json();
  } else {
    choice["logprobs"] = nullptr;
  }
  if (meta.prompt_logprobs)
    choice["prompt_logprobs"] = vllm_prompt_logprobs(tokenizer, c.prompt_logprobs(), *meta.prompt_logprobs);
  choice["finish_reason"] = nullptr;
  choice["token_ids"] = json::array();
  choice["exit_depths"] = json::array();
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
