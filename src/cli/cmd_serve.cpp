// `rlt serve`: the OpenAI-compatible HTTP server (docs/serving.md). SIGINT/SIGTERM drain
// in-flight requests, then exit 0; a second signal cuts the drain short.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fmt/format.h>
#include <pthread.h>
#include <thread>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "common/log.h"
#include "server/http_server.h"

namespace rlt::cli {
namespace {

struct ServeOptions {
  std::string model;
  EngineFlags engine;
  server::ServerOptions server;
};

// Signals are blocked in every thread (the mask is inherited, so this runs before any thread
// starts) and taken synchronously by one waiter thread: no async-signal-safety constraints.
class SignalWaiter {
 public:
  explicit SignalWaiter(server::Server& srv) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    thread_ = std::thread([this, &srv] {
      const timespec slice{0, 200 * 1000 * 1000};  // re-check `done_` five times a second
      while (!done_.load()) {
        siginfo_t info;
        if (sigtimedwait(&set_, &info, &slice) > 0) {
          std::fprintf(stderr, "rlt serve: %s received, shutting down\n", info.si_signo == SIGINT ? "SIGINT" : "SIGTERM");
          srv.request_shutdown();
        }
      }
    });
  }
  ~SignalWaiter() {
    done_.store(true);
    thread_.join();
  }
  static void block_in_this_thread() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a vanished client must not kill the server
  }

 private:
  sigset_t set_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

int run_serve(const ServeOptions& opt) {
  SignalWaiter::block_in_this_thread();
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  if (opt.model.empty()) {
    auto smollm2 = cached_smollm2();
    log_info(smollm2 ? "to serve a real trained model instead: rlt serve --model " + *smollm2
                     : "to serve a real trained model: " + how_to_get_smollm2() + ", then rlt serve --model <that file>");
  }
  server::Server srv(opt.server, opt.engine.resolve(*dir));
  if (Status s = srv.bind(); !s.ok()) return report_error(s);
  const std::string& host = opt.server.host;
  const bool v6 = host.find(':') != std::string::npos;
  // Tests and scripts read this line to learn the port (useful with --port 0).
  std::printf("rlt serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", host.c_str(), v6 ? "]" : "", srv.port());
  std::fflush(stdout);
  SignalWaiter signals(srv);
  if (Status s = srv.run(); !s.ok()) return report_error(s);
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<ServeOptions>();
  server::ServerOptions& s = opt->server;
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (docs/serving.md)");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  cmd->add_option("--host", s.host, "Address to listen on (loopback by default; 0.0.0.0 exposes the server)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "Port (0: any free port, printed at startup)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", s.api_key, "Require 'Authorization: Bearer KEY' on /v1 routes (or set RLT_API_KEY)")
      ->envname("RLT_API_KEY");
  cmd->add_option("--served-model-name", s.served_model_name, "Model name clients send (default: the folder's name)");
  cmd->add_option_function<std::string>(
         "--reasoning-parser",
         [&s](const std::string& name) {
           auto f = server::parse_reasoning_format(name);
           if (!f.ok()) throw CLI::ValidationError("--reasoning-parser", f.status().message());
           s.reasoning_parser = *f;
         },
         "Chat outputs of reasoning models: deepseek_r1 puts the <think> block (which the output starts in, "
         "as when the template opens it) into reasoning_content and the rest into content; none (the "
         "default): the text as generated");
  cmd->add_option("--max-requests", s.max_requests,
                  "Requests queued or running at once; more get 429 (0: 2 x --max-num-seqs within 64..4096)")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  cmd->add_option("--max-prompts", s.max_prompts_per_request, "Prompts in one /v1/completions request")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "Largest request body; larger gets 413")
      ->capture_default_str()->check(CLI::Range(size_t{256}, size_t{1} << 30));
  cmd->add_option("--request-timeout", s.request_timeout_s,
                  "Seconds until the whole response (non-streaming) or the first token (streaming); then 504")
      ->capture_default_str()->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--write-timeout", s.write_timeout_s, "Seconds one write to a client may block; slower readers are dropped")
      ->capture_default_str()->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--shutdown-timeout", s.shutdown_timeout_s, "Seconds SIGINT/SIGTERM wait for in-flight requests")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--http-threads", s.http_threads, "Connection threads (0: 2 x --max-requests + 8)")
      ->capture_default_str()->check(CLI::Range(0, 65536));
  // Hidden test hooks (empty group): slow loading / steps so tests can observe those states.
  cmd->add_option("--debug-load-delay", s.debug_load_delay_s, "Test hook: sleep before loading")->group("");
  cmd->add_option("--debug-step-delay", s.debug_step_delay_s, "Test hook: sleep after each engine step")->group("");
  add_engine_flags(*cmd, opt->engine);
  cmd->callback([opt, exit_code] { *exit_code = run_serve(*opt); });
}

}  // namespace rlt::cli
