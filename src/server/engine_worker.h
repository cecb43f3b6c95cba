// The one thread that owns the Engine (the engine is not thread-safe). It loads the engine,
// then loops: take new submissions and cancellations, run one engine step, hand each request's
// new tokens to its Channel, publish metrics.
//
// Thread safety: start/submit/cancel/stop and the accessors may be called from any thread;
// everything touching the Engine runs on the engine thread only (but for its documented
// thread-safe calls: prepare_structured_outputs).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "rlt/engine.h"
#include "server/api_error.h"
#include "server/channel.h"
#include "server/metrics.h"

namespace rlt::server {

class EngineWorker {
 public:
  struct Options {
    EngineConfig engine;
    int max_requests = 64;       // engine requests accepted at once (queued or running)
    double load_delay_s = 0.0;   // test hook
    double step_delay_s = 0.0;   // test hook
  };
  enum class State { kLoading, kReady, kFailed, kStopped };

  EngineWorker(Options options, Metrics* metrics);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Starts the engine thread, which loads the engine first, with the server's tokenizer (one per
  // process) when given.
  void start(std::shared_ptr<const tok::Tokenizer> tokenizer = nullptr);
  // Waits up to `timeout` for loading to end; returns the state then.
  State wait_loaded(std::chrono::milliseconds timeout);
  State state() const;
  // Why loading or a step failed (state kFailed).
  Status failure() const;

  // Queues one engine request per prompt; on success `*out` receives their tokens. `seeds`: one
  // per prompt replacing params.seed (each choice of n > 1 its own stream), or empty. Errors: 503
  // while loading, after an engine failure or once stopping; 429 when the requests in flight
  // would exceed max_requests.
  std::optional<ApiError> submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& params,
                                 std::shared_ptr<Channel>* out,
                                 std::vector<std::optional<uint64_t>> seeds = {});
  // Compiles a structured-output constraint on the caller's thread (the engine's compiler is
  // thread-safe): a 400 naming `param` when it cannot be compiled; nullopt when it compiled or
  // the engine is not ready (submit answers that).
  std::optional<ApiError> prepare_structured_outputs(const StructuredOutputs& spec, const std::string& param);
  // Aborts these requests; their final outputs (reason "abort") still reach the channel.
  void cancel(const std::vector<uint64_t>& request_ids);
  // Engine requests submitted and not yet finished.
  int64_t in_flight() const;
  // Refuses new work, aborts every request (their channels get 503 `shutting_down`), frees the
  // engine's KV and joins the thread. Idempotent.
  void stop();

  // Valid once loaded.
  std::string attention_info() const;

 private:
  struct Submission {
    std::shared_ptr<Channel> channel;
    std::vector<std::vector<int32_t>> prompts;
    SamplingParams params;
    std::vector<std::optional<uint64_t>> seeds;
    Clock::time_point arrival;
  };
  struct Live {
    std::shared_ptr<Channel> channel;
    size_t choice = 0;
    Clock::time_point arrival;
    Clock::time_point last_token;
  };

  void run();
  bool load();
  void admit(Submission& s);
  // Forwards one engine output (a delta) to its choice's channel.
  void distribute(RequestOutput o);
  void fail_everything(const ApiError& error);
  // Aborts an engine request; one that already finished is not an error.
  void abort_engine_request(uint64_t id);
  void publish_metrics();
  void release_one();

  Options options_;
  Metrics* metrics_;
  std::shared_ptr<const tok::Tokenizer> tokenizer_;  // handed to the engine
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  State state_ = State::kLoading;
  Status failure_;
  bool stopping_ = false;
  std::vector<Submission> submissions_;
  std::vector<uint64_t> cancels_;
  int64_t in_flight_ = 0;
  uint64_t next_id_ = 1;
  std::string attention_info_;

  // Engine thread only.
  std::unique_ptr<Engine> engine_;
  std::unordered_map<uint64_t, Live> live_;
};

}  // namespace rlt::server
