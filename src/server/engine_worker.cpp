#include "server/engine_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <type_traits>

#include "common/log.h"

namespace rlt::server {
namespace {

using std::chrono::duration;

// How long the idle engine thread sleeps before looking again; submissions and cancellations
// wake it at once, this only bounds the wait.
constexpr auto kIdleWait = std::chrono::milliseconds(250);
// Steps the shutdown runs to collect the final outputs of aborted requests (one usually suffices).
constexpr int kMaxShutdownSteps = 1000;

double seconds(Clock::duration d) {
  return duration<double>(d).count();
}

}  // namespace

EngineWorker::EngineWorker(Options options, Metrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

EngineWorker::~EngineWorker() {
  stop();
}

void EngineWorker::start(std::shared_ptr<const tok::Tokenizer> tokenizer) {
  tokenizer_ = std::move(tokenizer);
  thread_ = std::thread([this] { run(); });
}

EngineWorker::State EngineWorker::wait_loaded(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return state_ != State::kLoading; });
  return state_;
}

EngineWorker::State EngineWorker::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

Status EngineWorker::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

std::string EngineWorker::attention_info() const {
  std::lock_guard lock(mutex_);
  return attention_info_;
}

int64_t EngineWorker::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

std::optional<ApiError> EngineWorker::submit(std::vector<std::vector<int32_t>> prompts,
                                             const SamplingParams& params,
                                             std::shared_ptr<Channel>* out,
                                             std::vector<std::optional<uint64_t>> seeds) {
  const int64_t n = static_cast<int64_t>(prompts.size());
  auto channel = std::make_shared<Channel>(prompts.size());
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return unavailable("shutting_down", "the server is shutting down", 0);
    if (state_ == State::kLoading)
      return unavailable("not_ready", "the model is still loading; retry shortly", 1);
    if (state_ != State::kReady)
      return unavailable("engine_unavailable",
                         "the engine failed and no longer serves requests: " + failure_.message(),
                         0);
    if (n > options_.max_requests)
      return invalid_request(
          fmt::format(
              "{} choices in one request (prompts x n, or x best_of) exceed the server's limit of {} "
              "requests in flight (--max-requests)",
              n, options_.max_requests),
          "prompt");
    if (in_flight_ + n > options_.max_requests)
      return overloaded(fmt::format(
          "the server is at its limit of {} requests in flight (--max-requests); retry later",
          options_.max_requests));
    in_flight_ += n;
    for (auto& id : channel->request_ids()) id = next_id_++;
    submissions_.push_back({channel, std::move(prompts), params, std::move(seeds), Clock::now()});
  }
  cv_.notify_all();
  *out = std::move(channel);
  return std::nullopt;
}

std::optional<ApiError> EngineWorker::prepare_structured_outputs(const StructuredOutputs& spec,
                                                                const std::string& param) {
  Engine* engine = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::kReady || stopping_) return std::nullopt;
    engine = engine_.get();  // set once loaded and kept until the worker is destroyed
  }
  Status s = engine->prepare_structured_outputs(spec);
  if (s.ok()) return std::nullopt;
  return invalid_request(s.message(), param);
}

void EngineWorker::cancel(const std::vector<uint64_t>& request_ids) {
  {
    std::lock_guard lock(mutex_);
    cancels_.insert(cancels_.end(), request_ids.begin(), request_ids.end());
  }
  cv_.notify_all();
}

void EngineWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineWorker::release_one() {
  std::lock_guard lock(mutex_);
  --in_flight_;
}

bool EngineWorker::load() {
  if (options_.load_delay_s > 0)
    std::this_thread::sleep_for(duration<double>(options_.load_delay_s));
  auto engine = Engine::create(options_.engine, tokenizer_);
  std::lock_guard lock(mutex_);
  if (!engine.ok()) {
    state_ = State::kFailed;
    failure_ = engine.status();
    cv_.notify_all();
    return false;
  }
  engine_ = std::move(*engine);
  attention_info_ = engine_->attention_info();
  metrics_->set_attention_backend(engine_->attention_backend());
  state_ = State::kReady;
  cv_.notify_all();
  return true;
}

void EngineWorker::admit(Submission& s) {
  Channel& ch = *s.channel;
  size_t added = 0;
  for (size_t i = 0; i < s.prompts.size(); ++i) {
    const uint64_t id = ch.request_ids()[i];
    Status st;
    if (i < s.seeds.size()) {
      SamplingParams own = s.params;
      own.seed = s.seeds[i];
      st = engine_->add_request(id, std::move(s.prompts[i]), own);
    } else {
      st = engine_->add_request(id, std::move(s.prompts[i]), s.params);
    }
    if (!st.ok()) {
      // Refused at admission (e.g. a KV reservation that can never fit): the whole HTTP request
      // fails; choices already added are aborted and end through their abort outputs.
      std::vector<uint64_t> added_ids(ch.request_ids().begin(),
                                      ch.request_ids().begin() + static_cast<int64_t>(added));
      for (uint64_t a : added_ids) abort_engine_request(a);
      for (size_t k = added; k < s.prompts.size(); ++k) release_one();
      ch.fail(invalid_request("the engine refused the request: " + st.message()));
      return;
    }
    live_[id] = Live{s.channel, i, s.arrival, s.arrival};
    ++added;
  }
}

void EngineWorker::distribute(RequestOutput o) {
  auto it = live_.find(o.request_id);
  if (it == live_.end()) return;
  Live& l = it->second;
  const auto now = Clock::now();
  const int64_t before = o.num_tokens - static_cast<int64_t>(o.new_token_ids.size());
  for (int64_t k = before; k < o.num_tokens; ++k) {
    if (k == 0)
      metrics_->observe_ttft(seconds(now - l.arrival));
    else
      metrics_->observe_itl(seconds(now - l.last_token));
  }
  if (!o.new_token_ids.empty()) l.last_token = now;
  const std::shared_ptr<Channel> channel = l.channel;
  const size_t choice = l.choice;
  if (o.finished) {
    // Free the slot before the client can see the end: its next request must find it free.
    metrics_->observe_e2e(seconds(now - l.arrival));
    live_.erase(it);
    release_one();
  }
  channel->push(choice, std::move(o));
}

void EngineWorker::abort_engine_request(uint64_t id) {
  // kNotFound: the request finished meanwhile, its final output is on its way.
  Status s = engine_->abort(id);
  if (!s.ok() && s.code() != ErrorCode::kNotFound)
    log_error(fmt::format("aborting engine request {}: {}", id, s.to_string()));
}

void EngineWorker::fail_everything(const ApiError& error) {
  for (auto& [id, l] : live_) {
    if (engine_) abort_engine_request(id);
    l.channel->fail(error);
    release_one();
  }
  live_.clear();
}

void EngineWorker::publish_metrics() {
  if (!engine_) return;
  int64_t in_flight = 0, submitted = 0;
  {
    std::lock_guard lock(mutex_);
    in_flight = in_flight_;
    submitted = static_cast<int64_t>(submissions_.size());
  }
  metrics_->set_engine(engine_->metrics(), in_flight, submitted);
}

void EngineWorker::run() {
  if (!load()) return;
  publish_metrics();
  bool failed = false;
  while (true) {
    std::vector<Submission> submissions;
    std::vector<uint64_t> cancels;
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      // Deferred packing keeps the loop awake: a slice at a time below, between arrivals.
      const bool busy = !failed && (engine_->has_unfinished() || engine_->has_idle_work());
      if (!busy)
        cv_.wait_for(lock, kIdleWait,
                     [&] { return stopping_ || !submissions_.empty() || !cancels_.empty(); });
      submissions.swap(submissions_);
      cancels.swap(cancels_);
      stopping = stopping_;
    }
    if (stopping) {
      for (Submission& s : submissions) {
        for (size_t i = 0; i < s.prompts.size(); ++i) release_one();
        s.channel->fail(unavailable("shutting_down", "the server is shutting down", 0));
      }
      break;
    }
    if (failed) {
      // Nothing is accepted after a failure (submit refuses); late arrivals are failed here.
      for (Submission& s : submissions) {
        for (size_t i = 0; i < s.prompts.size(); ++i) release_one();
        s.channel->fail(unavailable("engine_unavailable", "the engine failed", 0));
      }
      continue;
    }
    for (Submission& s : submissions) admit(s);
    for (uint64_t id : cancels)
      if (live_.count(id)) abort_engine_request(id);
    bool stepped = false;
    if (engine_->has_unfinished()) {
      auto outputs = engine_->step();
      stepped = true;
      if (!outputs.ok()) {
        log_error("engine step failed; the server stops serving: " + outputs.status().to_string());
        {
          std::lock_guard lock(mutex_);
          state_ = State::kFailed;
          failure_ = outputs.status();
        }
        metrics_->set_state(false, false);
        fail_everything(unavailable("engine_unavailable",
                                    "the engine failed: " + outputs.status().message(), 0));
        failed = true;
      } else {
        for (RequestOutput& o : *outputs) distribute(std::move(o));
      }
    }
    if (!stepped && !failed) engine_->do_idle_work();
    publish_metrics();
    if (stepped && options_.step_delay_s > 0)
      std::this_thread::sleep_for(duration<double>(options_.step_delay_s));
  }
  // Shutdown: abort what is left, collect the aborts so the KV is freed, then tell the clients.
  for (auto& [id, l] : live_) abort_engine_request(id);
  for (int i = 0; i < kMaxShutdownSteps && engine_->has_unfinished(); ++i) {
    if (!engine_->step().ok()) break;
  }
  for (auto& [id, l] : live_) {
    l.channel->fail(
        unavailable("shutting_down", "the server shut down before the request finished", 0));
    release_one();
  }
  live_.clear();
  publish_metrics();
  std::lock_guard lock(mutex_);
  state_ = State::kStopped;
}

}  // namespace rlt::server
