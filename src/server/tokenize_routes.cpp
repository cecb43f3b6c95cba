#include "server/tokenize_routes.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "server/guards.h"
#include "server/openai_format.h"
#include "server/request_parser.h"

namespace rlt::server {
namespace {

// The guards every route shares, then the body as a JSON object naming the served model (or
// none). A failure is sent and reported by returning false.
bool accept(ServingState& s, const httplib::Request& req, httplib::Response& res, json* body) {
  std::optional<ApiError> e = check_host_and_origin(s, req);
  if (!e) e = check_auth(s, req);
  if (!e) e = check_serving(s);
  if (!e) e = check_json_content_type(req);
  if (!e) e = parse_json_body(req.body, body);
  if (!e && !body->is_object()) e = invalid_request("the request body must be a JSON object");
  if (!e && body->contains("model") && !(*body)["model"].is_null() &&
      (*body)["model"] != s.model->name) {
    const json& m = (*body)["model"];
    e = not_found_error(
        fmt::format("the model {} does not exist; this server serves '{}'",
                    m.is_string() ? fmt::format("'{}'", m.get<std::string>()) : describe_value(m),
                    s.model->name),
        "model_not_found");
    e->param = "model";
  }
  if (e) send_error(res, *e);
  return !e;
}

// {"prompt": text} or {"messages": [...]} (rendered with the chat template) into token ids.
std::optional<ApiError> tokenize(const json& body, const ModelContext& model,
                                 std::vector<int32_t>* ids) {
  FieldReader r(body);
  r.only_known({"model", "prompt", "messages", "add_special_tokens", "add_generation_prompt",
                "chat_template_kwargs", "return_token_strs"});
  const bool has_prompt = r.find("prompt") != nullptr, has_messages = r.find("messages") != nullptr;
  if (r.ok() && has_prompt == has_messages)
    r.fail(invalid_request("send exactly one of 'prompt' (text) and 'messages' (a chat)",
                           has_prompt ? "messages" : "prompt"));
  if (!r.ok()) return r.error();
  std::string text;
  // Text is tokenized as /v1/completions does (special tokens added); a rendered chat already
  // holds them (as /v1/chat/completions).
  bool add_special = has_prompt;
  r.read_bool("add_special_tokens", &add_special);
  if (has_prompt) {
    r.read_string("prompt", &text);
  } else {
    GenerationRequest chat;
    read_messages(r, &chat);
    bool add_generation_prompt = true;
    r.read_bool("add_generation_prompt", &add_generation_prompt);
    const json* kwargs = r.find("chat_template_kwargs");
    if (r.ok() && kwargs != nullptr && !kwargs->is_object())
      r.fail(invalid_request("'chat_template_kwargs' must be an object", "chat_template_kwargs"));
    if (!r.ok()) return r.error();
    if (!model.chat_template) {
      return invalid_request("this model has no chat template (" + model.chat_template_error +
                                 "); send 'prompt' instead",
                             "messages");
    }
    auto rendered = model.chat_template->render(chat.messages, add_generation_prompt,
                                                kwargs ? *kwargs : json::object());
    if (!rendered.ok()) {
      return invalid_request(
          "the chat template could not render the messages: " + rendered.status().message(),
          "messages");
    }
    text = std::move(*rendered);
  }
  if (!r.ok()) return r.error();
  auto encoded = model.tokenizer->encode(text, add_special);
  if (!encoded.ok())
    return invalid_request("the text could not be tokenized: " + encoded.status().message(),
                           has_prompt ? "prompt" : "messages");
  *ids = std::move(*encoded);
  return std::nullopt;
}

// The text of a special token id, or null when there is none (or it has no text).
json token_or_null(const tok::Tokenizer& tokenizer, std::optional<int32_t> id) {
  if (!id) return nullptr;
  auto text = tokenizer.id_to_token(*id);
  return text ? json(*text) : json(nullptr);
}

}  // namespace

void add_tokenize_routes(httplib::Server& svr, ServingState& s) {
  svr.Get("/tokenizer_info", [&s](const httplib::Request& req, httplib::Response& res) {
    std::optional<ApiError> e = check_host_and_origin(s, req);
    if (!e) e = check_auth(s, req);
    if (!e) e = check_serving(s);
    if (e) return send_error(res, *e);
    const ModelContext& model = *s.model;
    json out;
    out["tokenizer_class"] = "rlt";
    out["eos_token"] = token_or_null(*model.tokenizer, model.eos_token_ids.empty()
                                                           ? std::nullopt
                                                           : std::optional<int32_t>(model.eos_token_ids[0]));
    out["bos_token"] = token_or_null(*model.tokenizer, model.bos_token_id);
    out["pad_token"] = nullptr;
    out["model_max_length"] = model.max_context;
    out["chat_template"] = model.chat_template ? json(model.chat_template->source()) : json(nullptr);
    send_json(res, 200, dump_json(out));
  });
  svr.Post("/tokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (!accept(s, req, res, &body)) return;
    const ModelContext& model = *s.model;
    std::vector<int32_t> ids;
    if (auto e = tokenize(body, model, &ids)) return send_error(res, *e);
    bool strings = false;
    FieldReader r(body);
    r.read_bool("return_token_strs", &strings);
    if (!r.ok()) return send_error(res, *r.error());
    json out{{"count", ids.size()}, {"max_model_len", model.max_context}, {"tokens", ids}};
    if (strings) {
      json pieces = json::array();
      for (int32_t id : ids) pieces.push_back(model.tokenizer->id_to_token(id).value_or(""));
      out["token_strs"] = std::move(pieces);
    }
    send_json(res, 200, dump_json(out));
  });
  svr.Post("/detokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    json body;
    if (!accept(s, req, res, &body)) return;
    const ModelContext& model = *s.model;
    FieldReader r(body);
    r.only_known({"model", "tokens"});
    const json* tokens = r.find("tokens");
    if (r.ok() && (tokens == nullptr || !tokens->is_array()))
      r.fail(invalid_request("'tokens' must be a list of token ids", "tokens"));
    if (!r.ok()) return send_error(res, *r.error());
    std::vector<int32_t> ids;
    for (const json& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.vocab_size) {
        return send_error(res, invalid_request(fmt::format("'tokens' holds {}; token ids are "
                                                           "integers in [0, {})",
                                                           describe_value(t), model.vocab_size),
                                               "tokens"));
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    // As the generation endpoints' text: special tokens included, exactly as decoded.
    auto text = model.tokenizer->decode(ids, /*skip_special_tokens=*/false);
    if (!text.ok()) return send_error(res, invalid_request(text.status().message(), "tokens"));
    send_json(res, 200, dump_json(json{{"prompt", *text}}));
  });
}

}  // namespace rlt::server
