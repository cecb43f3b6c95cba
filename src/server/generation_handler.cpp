#include "server/generation_handler.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "common/log.h"
#include "server/generation_session.h"
#include "server/guards.h"
#include "server/openai_format.h"
#include "server/prompt_builder.h"
#include "server/request_parser.h"

namespace rlt::server {
namespace {

using std::chrono::milliseconds;

// How often a waiting handler wakes to look for a vanished client (and the drain).
constexpr milliseconds kPollSlice{100};
// Kernel send buffer per generation connection: ~1000 plain SSE chunks. Bounds the memory a
// client that stops reading pins, and how long it takes to notice it (then --write-timeout).
constexpr int kSendBufferBytes = 256 * 1024;

void respond_blocking(GenerationSession& session, const ResponseMeta& meta, const ModelContext& model,
                      httplib::Response& res) {
  std::vector<GenerationSession::Event> events;
  while (true) {
    switch (session.poll(kPollSlice, &events)) {
      case GenerationSession::Poll::kDone:
        return send_json(res, 200, dump_json(final_response(meta, session.choices(), *model.tokenizer)));
      case GenerationSession::Poll::kError: return send_error(res, *session.error());
      case GenerationSession::Poll::kTimeout:
        session.abandon("timeout");
        return send_error(res, timeout_error("the request did not finish within --request-timeout"));
      case GenerationSession::Poll::kDisconnected:
        session.abandon("cancelled");
        // Nobody reads this; httplib's write fails quietly.
        return send_error(res, invalid_request("the client closed the connection"));
      case GenerationSession::Poll::kProgress:
      case GenerationSession::Poll::kIdle: break;
    }
  }
}

// Everything the SSE content provider needs, shared by the provider and its releaser.
struct StreamState {
  StreamState(ServingState& s, std::shared_ptr<GenerationSession> sess, ResponseMeta m, const ModelContext& mc)
      : open(s), session(std::move(sess)), meta(std::move(m)), model(mc) {}
  OpenSession open;
  std::shared_ptr<GenerationSession> session;
  ResponseMeta meta;
  const ModelContext& model;
  std::vector<GenerationSession::Event> first_events;  // taken before the headers went out
  std::vector<bool> prompt_sent;  // per choice: its prompt chunk went out (echo, prompt_logprobs)
  std::vector<ToolCallParser> tool_parsers;  // per choice, with tools: text -> content + calls
  std::vector<ReasoningSplitter> reasoning;  // per choice, with a reasoning parser: text -> thinking + answer
  bool started = false;
  bool finished = false;
};

void append_events(StreamState& st, const std::vector<GenerationSession::Event>& events, std::string* out) {
  for (const auto& e : events) {
    if (st.meta.has_prompt_part()) {
      st.prompt_sent.resize(st.session->choices().size(), false);
      if (!st.prompt_sent[e.choice]) {
        st.prompt_sent[e.choice] = true;
        *out += sse_event(prompt_chunk(st.meta, e.choice, st.session->choices()[e.choice], *st.model.tokenizer));
      }
    }
    TokenPiece piece = e.piece;
    if (st.meta.reasoning != ReasoningFormat::kNone) {
      // The thinking streams as reasoning_content; only the answer goes on (to the tool parser).
      st.reasoning.resize(st.session->choices().size(), ReasoningSplitter(st.meta.reasoning));
      ReasoningSplitter::Delta r = st.reasoning[e.choice].push(piece.text, piece.last);
      piece.reasoning = std::move(r.reasoning);
      piece.text = std::move(r.content);
    }
    if (!st.meta.tool_calls) {
      *out += sse_event(token_chunk(st.meta, e.choice, piece, *st.model.tokenizer));
      continue;
    }
    // With tools the text goes through the choice's parser: content streams as it comes, a
    // call goes out whole once its block closes, and the finish says "tool_calls" after calls.
    st.tool_parsers.resize(st.session->choices().size());
    ToolCallParser& parser = st.tool_parsers[e.choice];
    ToolCallParser::Delta d = parser.push(piece.text, piece.last);
    piece.text = std::move(d.content);
    const size_t first_call = parser.calls() - d.calls.size();
    for (size_t k = 0; k < d.calls.size(); ++k)
      *out += sse_event(tool_call_chunk(st.meta, e.choice, first_call + k, d.calls[k]));
    if (piece.last && parser.calls() > 0 && piece.finish_reason == "stop") piece.finish_reason = "tool_calls";
    *out += sse_event(token_chunk(st.meta, e.choice, piece, *st.model.tokenizer));
  }
}

// One call of httplib's chunked content provider: write what arrived, or end the stream.
bool provide(StreamState& st, httplib::DataSink& sink) {
  if (st.finished) return true;
  std::string out;
  if (!st.started) {
    st.started = true;
    if (st.meta.endpoint == Endpoint::kChat)
      for (size_t i = 0; i < st.session->choices().size(); ++i) out += sse_event(chat_role_chunk(st.meta, i));
    append_events(st, st.first_events, &out);
  } else {
    std::vector<GenerationSession::Event> events;
    switch (st.session->poll(kPollSlice, &events)) {
      case GenerationSession::Poll::kError:
      case GenerationSession::Poll::kTimeout: {
        // The status line is gone: an error now can only abort the transport (no [DONE]), so
        // clients never mistake a broken stream for a complete one. The log says why.
        const auto& e = st.session->error();
        log_error(fmt::format("stream {} ended without [DONE]: {}", st.meta.id,
                              e ? fmt::format("HTTP {} ({}): {}", e->status, e->code, e->message) : "timed out"));
        st.session->abandon("error");
        return false;
      }
      case GenerationSession::Poll::kDisconnected: st.session->abandon("cancelled"); return false;
      case GenerationSession::Poll::kDone:
      case GenerationSession::Poll::kProgress:
      case GenerationSession::Poll::kIdle: break;
    }
    append_events(st, events, &out);
  }
  if (st.session->all_finished()) {
    if (st.meta.include_usage)
      out += sse_event(usage_chunk(st.meta, st.session->prompt_tokens(), st.session->completion_tokens()));
    out += kSseDone;
    st.finished = true;
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) {
    st.session->abandon("cancelled");  // the client went away (or stopped reading past --write-timeout)
    return false;
  }
  if (st.finished) sink.done();
  return true;
}

void respond_streaming(ServingState& s, std::shared_ptr<GenerationSession> session, const ResponseMeta& meta,
                       const ModelContext& model, httplib::Response& res) {
  // Wait for the first token so that failures before any output still get a JSON error.
  std::vector<GenerationSession::Event> events;
  bool done = false;
  while (events.empty() && !done) {
    switch (session->poll(kPollSlice, &events)) {
      case GenerationSession::Poll::kError: return send_error(res, *session->error());
      case GenerationSession::Poll::kTimeout:
        session->abandon("timeout");
        return send_error(res, timeout_error("no token within --request-timeout"));
      case GenerationSession::Poll::kDisconnected:
        session->abandon("cancelled");
        return send_error(res, invalid_request("the client closed the connection"));
      case GenerationSession::Poll::kDone: done = true; break;
      case GenerationSession::Poll::kProgress:
      case GenerationSession::Poll::kIdle: break;
    }
  }
  session->set_deadline(Clock::time_point::max());  // once streaming, max_tokens bounds the request
  auto st = std::make_shared<StreamState>(s, std::move(session), meta, model);
  st->first_events = std::move(events);
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [st](size_t, httplib::DataSink& sink) { return provide(*st, sink); },
      [st](bool) {
        // Runs when the response ends, completed or not: release the engine work either way.
        if (!st->session->all_finished()) st->session->abandon("cancelled");
        st->session.reset();
      });
}

// Each choice's prompt (one per engine request) as echo returns it: the text as sent, or the ids decoded (special
// tokens kept, as vLLM's).
std::vector<PromptEcho> echoed_prompts(const GenerationRequest& request, const EngineInputs& inputs,
                                       const tok::Tokenizer& tokenizer) {
  std::vector<PromptEcho> echoes;
  for (size_t k = 0; k < inputs.prompts.size(); ++k) {
    const size_t i = k / static_cast<size_t>(std::max(inputs.copies, 1));  // the prompt of choice k
    PromptEcho e;
    e.ids = inputs.prompts[k];
    if (i < request.prompts.size() && request.prompts[i].is_text) {
      e.text = request.prompts[i].text;
    } else {
      auto text = tokenizer.decode(e.ids, /*skip_special_tokens=*/false);
      if (text.ok()) e.text = std::move(*text);
    }
    echoes.push_back(std::move(e));
  }
  return echoes;
}

}  // namespace

void handle_generation(ServingState& s, Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = Clock::now();
  OpenSession open(s);
  if (auto e = check_host_and_origin(s, req)) return send_error(res, *e);
  if (auto e = check_auth(s, req)) return send_error(res, *e);
  if (auto e = check_serving(s)) return send_error(res, *e);
  if (auto e = check_json_content_type(req)) return send_error(res, *e);
  json body;
  if (auto e = parse_json_body(req.body, &body)) return send_error(res, *e);
  GenerationRequest request;
  const ParseLimits limits{s.options.max_prompts_per_request, 16};
  auto parsed = endpoint == Endpoint::kChat ? parse_chat_request(body, limits, &request)
                                            : parse_completion_request(body, limits, &request);
  if (parsed) return send_error(res, *parsed);
  const ModelContext& model = *s.model;
  if (request.model != model.name)
    return send_error(res, not_found_error(fmt::format("the model '{}' does not exist; this server serves '{}'",
                                                       request.model, model.name), "model_not_found"));
  EngineInputs inputs;
  if (auto e = build_engine_inputs(request, model, &inputs)) return send_error(res, *e);
  ResponseMeta meta;
  if (request.echo) meta.echoes = echoed_prompts(request, inputs, *model.tokenizer);
  if (inputs.params.structured_outputs) {
    // Compiled here, on the request's thread: a bad constraint is a 400 before anything queues,
    // and the engine thread finds it in its cache.
    const std::string param = request.structured_param.empty() ? "tools" : request.structured_param;
    if (auto e = s.worker.prepare_structured_outputs(*inputs.params.structured_outputs, param))
      return send_error(res, *e);
  }
  std::shared_ptr<Channel> channel;
  if (auto e = s.worker.submit(std::move(inputs.prompts), inputs.params, &channel, std::move(inputs.seeds)))
    return send_error(res, *e);

  auto probe = ConnectionProbe::find(req.local_port, req.remote_addr, req.remote_port);
  probe.limit_writes(s.options.write_timeout_s, kSendBufferBytes);
  auto session = std::make_shared<GenerationSession>(s.worker, s.metrics, request, channel, probe);
  session->set_deadline(arrival + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(s.options.request_timeout_s)));
  meta.endpoint = endpoint;
  meta.id = make_response_id(endpoint);
  meta.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  meta.model = model.name;
  meta.logprobs = request.logprobs;
  meta.top_logprobs = request.top_logprobs;
  meta.prompt_logprobs = request.prompt_logprobs;
  meta.n = request.n;
  meta.copies = request.copies();
  meta.include_usage = request.include_usage;
  meta.tool_calls = request.tools.active();
  // A constrained output (structured output, a forced tool call) has no reasoning phase: the
  // grammar holds from its first token, so it is all answer.
  const bool constrained = request.params.structured_outputs.has_value() || request.tools.forces_call();
  if (endpoint == Endpoint::kChat && !constrained) meta.reasoning = s.options.reasoning_parser;
  if (request.stream) return respond_streaming(s, std::move(session), meta, model, res);
  respond_blocking(*session, meta, model, res);
}

}  // namespace rlt::server
