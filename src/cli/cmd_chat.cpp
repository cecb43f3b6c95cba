// `rlt chat`: an interactive chat in the terminal. Each turn renders the whole conversation with
// the model's chat template, streams the reply as the engine produces it, and stops at the
// template's end-of-turn token. /reset starts over, /exit (or end of input) quits, Ctrl-C stops
// the reply being written and keeps the program running.
#include <fmt/format.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "common/log.h"
#include "rlt/engine.h"
#include "source/model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace rlt::cli {
namespace {

using OJson = nlohmann::ordered_json;

struct ChatOptions {
  std::string model;
  std::string system;
  EngineFlags engine;
  SamplingFlags sampling;
};

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_sigint(int) {
  g_interrupted = true;
}

// SIGINT sets a flag instead of ending the process; without SA_RESTART a read blocked on the
// terminal returns, so the prompt can say how to quit.
void install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

Result<std::string> resolve_chat_model(const std::string& requested) {
  if (!requested.empty()) return requested;
  if (auto smollm2 = cached_smollm2()) return *smollm2;
  log_warn(
      "no --model and no SmolLM2 in the cache: chatting with the demo model, whose random weights "
      "write "
      "gibberish (" +
      how_to_get_smollm2() + ")");
  return resolve_model_dir("");
}

// One reply: streams new text to stdout until the request ends or Ctrl-C. Returns the reply.
Result<std::string> stream_reply(Engine& engine, uint64_t id) {
  std::string reply;
  bool cancelled = false, done = false;
  while (!done && engine.has_unfinished()) {
    if (g_interrupted.exchange(false) && !cancelled) {
      cancelled = true;
      // The reply may have finished meanwhile (its output still in flight): nothing to stop then.
      if (Status s = engine.abort(id); !s.ok() && s.code() != ErrorCode::kNotFound) return s;
    }
    RLT_ASSIGN_OR_RETURN(std::vector<RequestOutput> outputs, engine.step());
    for (const RequestOutput& o : outputs) {
      if (o.request_id != id) continue;
      std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
      std::fflush(stdout);
      reply += o.new_text;
      if (o.finished && !o.error.empty())
        return internal_error("the engine aborted the reply: " + o.error);
      done = done || o.finished;
    }
  }
  std::printf(cancelled ? " [stopped]\n" : "\n");
  return reply;
}

int run_chat(const ChatOptions& opt) {
  auto path = resolve_chat_model(opt.model);
  if (!path.ok()) return report_error(path.status());
  auto source = source::ModelSource::open(*path);
  if (!source.ok()) return report_error(source.status());
  auto tokenizer = source->tokenizer();
  if (!tokenizer.ok())
    return report_error(tokenizer.status().with_context("rlt chat needs the model's tokenizer"));
  auto tmpl = source->chat_template();
  if (!tmpl.ok())
    return report_error(tmpl.status().with_context("rlt chat needs the model's chat template"));
  auto engine = Engine::create(opt.engine.resolve(*path), *tokenizer);
  if (!engine.ok()) return report_error(engine.status());
  SamplingParams params = opt.sampling.resolve();
  for (int32_t id : tok::end_of_turn_ids(*tmpl, **tokenizer)) params.stop_token_ids.push_back(id);
  install_sigint_handler();
  std::printf(
      "rlt chat with %s (%s). /reset clears the conversation, /exit quits, Ctrl-C stops a reply.\n",
      source->default_name().c_str(), source->format_name().c_str());
  OJson history = OJson::array();
  uint64_t next_id = 1;
  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    g_interrupted = false;
    if (!std::getline(std::cin, line)) {
      // Ctrl-C at the prompt interrupts the read (stdin then looks like end of input): go on.
      if (g_interrupted.exchange(false)) {
        std::cin.clear();
        std::clearerr(stdin);
        std::printf("\n(/exit quits)\n");
        continue;
      }
      std::printf("\n");
      return 0;  // end of input
    }
    if (line == "/exit" || line == "/quit") return 0;
    if (line == "/reset") {
      history = OJson::array();
      std::printf("(conversation cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    OJson messages = OJson::array();
    if (!opt.system.empty()) messages.push_back({{"role", "system"}, {"content", opt.system}});
    for (const auto& m : history) messages.push_back(m);
    messages.push_back({{"role", "user"}, {"content", line}});
    auto text = tmpl->render(messages, /*add_generation_prompt=*/true);
    if (!text.ok()) return report_error(text.status());
    // The template writes the special tokens itself (as transformers' apply_chat_template).
    auto ids = (*tokenizer)->encode(*text, /*add_special_tokens=*/false);
    if (!ids.ok()) return report_error(ids.status());
    const uint64_t id = next_id++;
    if (Status s = (*engine)->add_request(id, *ids, params); !s.ok()) {
      // Too long for the context or the cache: say so and let the user start over.
      std::printf("(%s; /reset starts a new conversation)\n", s.message().c_str());
      continue;
    }
    auto reply = stream_reply(**engine, id);
    if (!reply.ok()) return report_error(reply.status());
    history.push_back({{"role", "user"}, {"content", line}});
    history.push_back({{"role", "assistant"}, {"content", *reply}});
  }
}

}  // namespace

void add_chat_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<ChatOptions>();
  // Chat defaults: SmolLM2's recommended sampling, replies up to 512 tokens.
  opt->sampling.params.temperature = 0.2;
  opt->sampling.params.top_p = 0.9;
  opt->sampling.params.max_tokens = 512;
  CLI::App* cmd = app.add_subcommand(
      "chat", "Chat with the model in the terminal (its chat template, streamed replies)");
  cmd->add_option("--model", opt->model,
                  "Hugging Face model folder or .gguf file (default: SmolLM2 from rlt's cache when "
                  "scripts/setup.sh "
                  "fetched it, else the demo model)");
  cmd->add_option("--system", opt->system,
                  "System prompt (default: the template's own, if it has one)");
  add_engine_flags(*cmd, opt->engine);
  add_sampling_flags(*cmd, opt->sampling);
  CLI::Option* log_level = app.get_option("--log-level");
  cmd->callback([opt, exit_code, log_level] {
    // The terminal belongs to the conversation: only warnings unless a level was asked for.
    if (log_level->count() == 0) set_log_level(LogLevel::kWarn);
    *exit_code = run_chat(*opt);
  });
}

}  // namespace rlt::cli
