// The scheduler: owns requests and their logical progress. Each step it picks one stage and
// builds a batch (rows may sit at different loop depths), asks the KV manager for capacity
// (admission, growth, preemption), and after the runner executed the batch it applies the result
// in update_from_output — the single place progress changes.
//
// Thread-safety: none; the engine thread calls everything.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_config.h"
#include "spec/draft_budget.h"
#include "spec/ngram_drafter.h"

namespace rlt::sched {

// One row group of a batch. PREFILL: prompt positions [token_start, token_start + token_count)
// at every depth. PRELUDE, RECURRENT, CODA: one row at `position` (RECURRENT: at loop `depth`,
// 0-based, the loop this row runs now). VERIFY: positions [token_start, token_start +
// token_count) at every depth: the last sampled token and token_count - 1 drafts.
struct ScheduledItem {
  RequestId id = 0;
  // The request's arrival number: results that come back after the request was cancelled and its
  // id reused by a new request are recognized by it (asynchronous scheduling).
  uint64_t arrival = 0;
  int32_t token_start = 0;
  int32_t token_count = 1;
  int32_t position = 0;
  int32_t depth = 0;
};

struct SchedulerOutput {
  uint64_t seq = 0;  // 1, 2, 3, ... without gaps
  Stage stage = Stage::kWaiting;
  std::vector<ScheduledItem> items;
  int64_t rows() const;
};

// What the runner produced for a batch, aligned with its items.
struct RunnerOutput {
  uint64_t seq = 0;
  Stage stage = Stage::kWaiting;
  std::vector<float> gate_logits;     // RECURRENT: one per item
  std::vector<int32_t> sampled;       // CODA: one token per item; VERIFY: `emitted` per item
  std::vector<int32_t> emitted;       // VERIFY: the tokens each item's verification gave
  std::vector<double> exit_values = {};  // RECURRENT, Huginn's criteria: one per item
};

// A token that left the loop early under last_exited: its K/V must be copied to deeper planes.
struct ExitedToken {
  RequestId id = 0;
  int32_t position = 0;
  int32_t exit_depth = 0;  // 1-based loops run
};

struct StepUpdate {
  std::vector<RequestId> new_tokens;  // requests that got an output token this step
  std::vector<RequestId> finished;    // requests that finished this step (KV released)
  std::vector<kv::SlotCopy> finalize_copies;  // execute, then confirm_finalized(exited)
  std::vector<ExitedToken> exited;
};

// Hooks the engine implements for preemption: save and restore what lives outside the KV pages.
class PreemptionHooks {
 public:
  virtual ~PreemptionHooks() = default;
  // Copies the request's KV pages to host (kv.snapshot through the runner's storage).
  virtual Result<kv::KVSnapshot> snapshot_kv(RequestId id) = 0;
  // kv.resume through the runner's storage.
  virtual Status resume_kv(RequestId id, const kv::KVSnapshot& snapshot) = 0;
};

struct SchedulerCounters {
  int64_t preemptions = 0;
  int64_t resumptions = 0;
  int64_t admission_deferrals = 0;
  // Admission tries that waited for a running prefill to write the prompt page they share.
  int64_t shared_prefix_waits = 0;
  int64_t batches = 0;
  // RECURRENT batches, and those whose rows run at two or more depths (Continuous Depth Batching
  // at work: rows of tokens at different loops share the pass).
  int64_t recurrent_batches = 0;
  int64_t mixed_depth_batches = 0;
  // Speculative decoding: request verifications, the drafts they checked, the drafts accepted,
  // and the tokens they gave (accepted drafts plus the target's own token each).
  int64_t verifications = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t verified_tokens = 0;
};

class Scheduler {
 public:
  // `depth`: the model's loop count; `eos_ids`: stop tokens unless a request ignores eos.
  Scheduler(const SchedulerConfig& config, kv::KVCacheManager& kv, int32_t depth,
            std::vector<int32_t> eos_ids, PreemptionHooks* hooks);

  // Validates against the model and the cache (impossible capacity, loop bounds, ids) and queues
  // the request. A live duplicate id is refused.
  Status add_request(Request request);

  // The next batch, or nullopt when nothing can run now. Errors mean a broken invariant.
  Result<std::optional<SchedulerOutput>> schedule();

  // Applies the runner's results for `batch`. Finished requests have released their KV.
  Result<StepUpdate> update_from_output(const SchedulerOutput& batch, const RunnerOutput& out);

  // Asynchronous scheduling only (config.async_scheduling), right after the runner accepted
  // `batch` and before its results are back. Applies what needs no result — prompt progress, the
  // prelude, enqueued K/V writes, loop counts — so that the next batch can be scheduled now. A
  // request that ran a loop learns whether it runs another once the exit signals of its earlier
  // loops are applied (here, or in a later update_from_output). Finalize copies it returns run
  // after `batch` on the runner's queue.
  Result<StepUpdate> on_submitted(const SchedulerOutput& batch);

  // A VERIFY batch of `rows` rows took `seconds` in the runner: the cost model behind adaptive
  // draft counts (spec/draft_budget.h).
  void observe_verify_cost(int64_t rows, double seconds) { verify_cost_.observe(rows, seconds); }
  // The fitted cost of a verify pass (seconds = a + b · rows), for metrics.
  const spec::VerifyCostModel& verify_cost() const { return verify_cost_; }

  // Whether `token` ends request `r` (the model's EOS unless ignored, or one of its stop ids).
  bool stops(const Request& r, int32_t token) const;

  // After the runner executed update.finalize_copies: marks deeper planes written.
  Status confirm_finalized(const std::vector<ExitedToken>& exited);

  // Cancels a request in any stage; its KV (or snapshot) is released. kNotFound if unknown.
  Status abort(RequestId id);

  const Request* find(RequestId id) const;
  // Removes a finished request and returns it (the engine collects final outputs).
  std::optional<Request> take_finished(RequestId id);
  bool has_unfinished() const;
  int32_t num_waiting() const { return static_cast<int32_t>(queue(Stage::kWaiting).size()); }
  int32_t num_running() const { return running_; }
  int32_t num_suspended() const;
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  std::deque<RequestId>& queue(Stage s) { return queues_[static_cast<size_t>(s)]; }
  const std::deque<RequestId>& queue(Stage s) const { return queues_[static_cast<size_t>(s)]; }
  Request& at(RequestId id) { return *requests_.at(id); }

  // Whether stage `s` has requests and was not tried in vain in this schedule() call.
  bool ready(Stage s) const;
  // RECURRENT or VERIFY (the stages that decode), taking turns when both have work; kWaiting if
  // neither does.
  Stage decode_stage() const;
  Stage choose_stage_refill() const;
  Stage choose_stage_no_refill();
  Status admit();
  Result<bool> try_admit(Request& r, int32_t reserved_blocks);
  // Whether a prompt page r shares is being computed by a running request's prefill right now
  // (prefix caching on): then r waits and reads it, and every page before it, from the cache once
  // written (n > 1 choices, concurrent identical prompts) instead of computing it again.
  bool awaits_shared_page(Request& r);
  int32_t reserved_growth_blocks() const;
  Result<SchedulerOutput> take(Stage stage);
  // VERIFY: how many drafts each selected item verifies (its token_count), grown into the KV.
  Status plan_drafts(SchedulerOutput& out, int64_t row_budget);
  // Speculation resolved for a request from its params and the scheduler's defaults; refuses
  // combinations that cannot be verified exactly, with the reason — when the request asked for
  // speculation itself; the engine's default gives way (plain decoding) instead.
  Status resolve_speculation(Request& r) const;
  // Why the request's resolved speculation (r.spec) cannot be verified exactly; OK when it can.
  Status speculation_refusal(const Request& r) const;
  // A self draft cycle ends: VERIFY with the drafts made so far.
  void end_draft_cycle(Request& r);
  // After a token was emitted (and the request goes on): PRELUDE, VERIFY, or a self draft cycle.
  void begin_cycle(Request& r);
  // Self drafting: how many drafts a cycle makes (adaptive: the most tokens per loop of work).
  int32_t self_cycle_drafts(const Request& r) const;
  // Appends an output token at `depth` and applies the stop rules; true when the request finished.
  bool emit_token(Request& r, int32_t token, int32_t depth, StepUpdate& update);
  Status apply_verify(Request& r, const ScheduledItem& item, std::span<const int32_t> tokens, StepUpdate& update);
  // Grows r's KV to `tokens`; on failure preempts a victim (when enabled) and retries once.
  Result<bool> grow(Request& r, int32_t tokens, const std::vector<RequestId>& excluded);
  // Suspends one eligible victim for `requester`; false when none qualifies.
  Result<bool> preempt_for(const Request& requester, const std::vector<RequestId>& excluded, bool priority_only);
  void remove_from_queues(RequestId id);
  // Every stage change goes through here: it keeps the running count (not waiting, not finished).
  void set_stage(Request& r, Stage stage);
  void finish(Request& r, FinishReason reason);
  // `exit_value`: the criterion's value for a request exiting by one of Huginn's criteria.
  bool exit_now(Request& r, float gate_logit, double exit_value);
  // Whether a request waits in CODA for its first token.
  bool first_token_in_coda() const;
  // CODA: the token just read out has its K/V in the outer planes (Huginn's prelude and coda).
  Status record_outer_written(const Request& r);
  void apply_prefill(Request& r, const ScheduledItem& item);
  void start_token(Request& r);  // the prelude ran: loops start over
  // The token leaves the loop after r.loops_done loops: finalize copies, then CODA.
  Status exit_loop(Request& r, int32_t position, StepUpdate& update);
  // Async: applies the exit signal of loop `loops` (1-based) of the token in flight.
  Status apply_signal(Request& r, int32_t loops, float gate_logit);
  // Async: once the signals it needs are applied, decides whether the request runs another loop.
  Status try_decide(Request& r, StepUpdate& update);
  bool any_awaiting_decision() const;

  SchedulerConfig config_;
  kv::KVCacheManager& kv_;
  int32_t depth_;
  std::vector<int32_t> eos_ids_;
  PreemptionHooks* hooks_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::deque<RequestId> queues_[7];
  uint64_t next_arrival_ = 0;
  uint64_t next_seq_ = 1;
  int32_t prefill_batches_since_recurrent_ = 0;
  uint32_t tried_stages_ = 0;  // bit per Stage: came back empty in this schedule() call
  enum class Phase : uint8_t { kFill, kCore, kCoda } phase_ = Phase::kFill;  // no-refill cohorts
  int64_t suspended_bytes_ = 0;
  int32_t running_ = 0;  // requests neither waiting nor finished
  SchedulerCounters counters_;
  Stage last_decode_ = Stage::kRecurrent;  // RECURRENT and VERIFY take turns
  spec::NgramDrafter ngram_;
  spec::VerifyCostModel verify_cost_;
  int64_t verify_batches_ = 0;
};

}  // namespace rlt::sched
