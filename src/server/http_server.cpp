#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "common/log.h"
#include "server/connection_probe.h"
#include "server/generation_handler.h"
#include "server/guards.h"
#include "server/info_routes.h"
#include "server/tokenize_routes.h"
#include "server/serving_state.h"

namespace rlt::server {
namespace {

using std::chrono::milliseconds;

// After the drain gave up and aborted what was left, handlers need a moment to send their 503s
// or close their streams before the listener stops.
constexpr milliseconds kAfterAbortGrace{2000};

ServerOptions resolved(const ServerOptions& o, const EngineConfig& engine) {
  return o.resolved(with_device_defaults(engine).max_num_seqs);
}

EngineWorker::Options worker_options(const ServerOptions& o, EngineConfig engine) {
  EngineWorker::Options w;
  w.engine = std::move(engine);
  w.max_requests = o.max_requests;
  w.load_delay_s = o.debug_load_delay_s;
  w.step_delay_s = o.debug_step_delay_s;
  return w;
}

// Every route and the one method it answers (HEAD comes with GET): the metrics' route labels
// (bounded: every model id shares one, unknown paths share "other") and the Allow header of a 405
// (httplib itself answers a known path asked with another method 404).
struct KnownRoute {
  const char* label;
  const char* method;
};
const KnownRoute* find_route(const std::string& path) {
  static constexpr KnownRoute kRoutes[] = {{"/", "GET"},
                                           {"/health", "GET"},
                                           {"/metrics", "GET"},
                                           {"/v1/models", "GET"},
                                           {"/v1/attention", "GET"},
                                           {"/v1/completions", "POST"},
                                           {"/v1/chat/completions", "POST"},
                                           {"/tokenize", "POST"},
                                           {"/detokenize", "POST"},
                                           {"/tokenizer_info", "GET"}};
  static constexpr KnownRoute kModel{"/v1/models/{id}", "GET"};
  for (const KnownRoute& r : kRoutes)
    if (path == r.label) return &r;
  constexpr std::string_view kModelPrefix = "/v1/models/";
  if (path.size() > kModelPrefix.size() && path.compare(0, kModelPrefix.size(), kModelPrefix) == 0)
    return &kModel;
  return nullptr;
}

std::string route_label(const std::string& path) {
  const KnownRoute* r = find_route(path);
  return r ? r->label : "other";
}

// A known route asked with a method it does not answer: 405 with Allow, else nothing.
std::optional<ApiError> wrong_method(const httplib::Request& req, httplib::Response& res) {
  const KnownRoute* r = find_route(req.path);
  if (r == nullptr || req.method == r->method ||
      (req.method == "HEAD" && std::string_view(r->method) == "GET"))
    return std::nullopt;
  res.set_header("Allow", r->method);
  return method_not_allowed(fmt::format("{} is not allowed on {}: this route answers {} only",
                                        req.method, r->label, r->method));
}

ApiError error_for_status(const ServerOptions& o, const httplib::Request& req, int status) {
  switch (status) {
    case 404:
      return not_found_error(fmt::format("no route {} {}", req.method, req.path.substr(0, 200)),
                             "not_found");
    case 413:
      return payload_too_large(fmt::format(
          "the body exceeds the server's limit of {} bytes (--max-body-bytes)", o.max_body_bytes));
    case 400:
      return invalid_request("malformed HTTP request");
    default: {
      ApiError e = internal_server_error(fmt::format("HTTP error {}", status));
      e.status = status;
      return e;
    }
  }
}

// httplib 0.11 listens with a backlog of 5: a burst of clients (64 connecting at once) overflows
// it and the kernel drops their handshakes, which then stall for a second or fail. listen() on the
// bound socket again widens the queue; svr_sock_ is protected, hence the subclass.
class Listener : public httplib::Server {
 public:
  void widen_backlog() {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, SOMAXCONN);
  }
};

std::pair<time_t, time_t> split_seconds(double s) {
  const auto sec = static_cast<time_t>(s);
  return {sec, static_cast<time_t>((s - static_cast<double>(sec)) * 1e6)};
}

}  // namespace

struct Server::Impl {
  // `engine` is declared before `state`, so it is ready when `state` is built.
  Impl(const ServerOptions& o, EngineConfig e)
      : engine(std::move(e)),
        state(resolved(o, engine), worker_options(resolved(o, engine), engine)) {}

  void configure();
  void drain();
  bool shutdown_requested(int at_least) {
    std::lock_guard lock(mutex);
    return shutdown_requests >= at_least;
  }

  EngineConfig engine;
  ServingState state;
  Listener svr;
  int port = 0;
  std::mutex mutex;
  std::condition_variable cv;
  int shutdown_requests = 0;
};

void Server::Impl::configure() {
  const ServerOptions& o = state.options;
  const int threads = o.resolved_http_threads();
  // Thread per connection: every open stream pins a worker, so the pool must cover
  // max_requests streams plus keep-alive connections and quick routes.
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_tcp_nodelay(true);
  svr.set_payload_max_length(o.max_body_bytes);
  const auto [wsec, wusec] = split_seconds(o.write_timeout_s);
  svr.set_write_timeout(wsec, wusec);
  // httplib calls this for every status >= 400; only its own bare errors (404, 413, 400 on a
  // malformed request) get a body here, ours already have one.
  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 404) {
          if (auto e = wrong_method(req, res)) {
            send_error(res, *e);
            return httplib::Server::HandlerResponse::Handled;
          }
        }
        send_error(res, error_for_status(state.options, req, res.status));
        return httplib::Server::HandlerResponse::Handled;
      }));
  svr.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        send_error(res, internal_server_error("the server failed to handle the request: " + what));
      });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    state.metrics.count_http(route_label(req.path), res.status);
  });
  add_info_routes(svr, state);
  add_tokenize_routes(svr, state);
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(state, Endpoint::kCompletions, req, res);
  });
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(state, Endpoint::kChat, req, res);
  });
}

void Server::Impl::drain() {
  state.draining.store(true);
  state.metrics.set_state(false, true);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(state.options.shutdown_timeout_s));
  auto busy = [&] { return state.worker.in_flight() > 0 || state.open_sessions.load() > 0; };
  log_info(fmt::format("shutting down: draining {} requests (up to {} s)", state.worker.in_flight(),
                       state.options.shutdown_timeout_s));
  {
    std::unique_lock lock(mutex);
    while (busy() && shutdown_requests < 2 && std::chrono::steady_clock::now() < deadline)
      cv.wait_for(lock, milliseconds(50));
  }
  if (busy())
    log_warn(fmt::format("shutdown: aborting {} unfinished requests", state.worker.in_flight()));
  state.worker.stop();  // aborts what is left; their handlers answer 503 or close their streams
  const auto grace = std::chrono::steady_clock::now() + kAfterAbortGrace;
  while (state.open_sessions.load() > 0 && std::chrono::steady_clock::now() < grace)
    std::this_thread::sleep_for(milliseconds(20));
}

Server::Server(ServerOptions options, EngineConfig engine)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(engine))) {
  impl_->configure();
}

Server::~Server() = default;

Status Server::bind() {
  const ServerOptions& o = impl_->state.options;
  if (o.port == 0) {
    impl_->port = impl_->svr.bind_to_any_port(o.host);
    if (impl_->port < 0) return io_error(fmt::format("cannot listen on {} (any port)", o.host));
  } else {
    if (!impl_->svr.bind_to_port(o.host, o.port))
      return io_error(fmt::format(
          "cannot listen on {}:{} (in use, or not an address of this host?)", o.host, o.port));
    impl_->port = o.port;
  }
  impl_->svr.widen_backlog();
  return {};
}

int Server::port() const {
  return impl_->port;
}

Status Server::run() {
  ServingState& s = impl_->state;
  std::thread listener([this] { impl_->svr.listen_after_bind(); });
  // stop() is a no-op until the listener runs; without this wait an early stop would leave
  // listen_after_bind() running forever. (httplib 0.11 has no wait_until_ready.)
  for (int i = 0; i < 500 && !impl_->svr.is_running(); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  auto stop_listener = [&] {
    impl_->svr.stop();
    // Idle keep-alive connections would hold their threads (and the exit) for the whole
    // keep-alive timeout; every request is answered by now.
    ConnectionProbe::shutdown_all(impl_->port);
    listener.join();
  };
  // The tokenizer first (health answers "loading" meanwhile), then the engine on its own thread
  // with the same tokenizer: one per process, and its transient memory is gone before the
  // weights are packed.
  auto model = ModelContext::load(impl_->engine.model, s.options.served_model_name);
  if (!model.ok()) {
    stop_listener();
    return model.status();
  }
  s.worker.start(model->tokenizer);
  EngineWorker::State loaded = EngineWorker::State::kLoading;
  while (loaded == EngineWorker::State::kLoading && !impl_->shutdown_requested(1))
    loaded = s.worker.wait_loaded(milliseconds(200));
  if (loaded != EngineWorker::State::kReady) {
    s.worker.stop();
    stop_listener();
    if (loaded == EngineWorker::State::kLoading) return {};  // asked to stop while loading
    return s.worker.failure();
  }
  s.model = std::make_unique<const ModelContext>(std::move(*model));
  s.ready.store(true, std::memory_order_release);
  s.metrics.set_state(true, false);
  log_info(fmt::format(
      "ready: serving '{}' on port {} (up to {} requests in flight, {} connection threads; reasoning parser "
      "{})",
      s.model->name, impl_->port, s.options.max_requests, s.options.resolved_http_threads(),
      reasoning_format_name(s.options.reasoning_parser)));
  {
    std::unique_lock lock(impl_->mutex);
    impl_->cv.wait(lock, [&] { return impl_->shutdown_requests > 0; });
  }
  impl_->drain();
  stop_listener();
  log_info("server stopped");
  return {};
}

void Server::request_shutdown() {
  {
    std::lock_guard lock(impl_->mutex);
    ++impl_->shutdown_requests;
  }
  impl_->cv.notify_all();
}

}  // namespace rlt::server
