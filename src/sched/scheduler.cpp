#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlt::sched {

int64_t SchedulerOutput::rows() const {
  int64_t n = 0;
  for (const auto& i : items) n += i.token_count;
  return n;
}

Scheduler::Scheduler(const SchedulerConfig& config, kv::KVCacheManager& kv, int32_t depth,
                     std::vector<int32_t> eos_ids, PreemptionHooks* hooks)
    : config_(config),
      kv_(kv),
      depth_(depth),
      eos_ids_(std::move(eos_ids)),
      hooks_(hooks),
      ngram_(config.speculative.ngram_min, config.speculative.ngram_max) {}

Status Scheduler::resolve_speculation(Request& r) const {
  const SpeculativeConfig& base = config_.speculative;
  const SpeculativeParams asked = r.params.speculative.value_or(SpeculativeParams{});
  Speculation& s = r.spec;
  s.method = asked.method.value_or(base.method);
  if (!s.enabled()) return {};
  s.max_drafts = asked.num_tokens > 0 ? asked.num_tokens : base.num_tokens;
  s.cycle_cap = s.max_drafts;
  s.draft_loops = asked.draft_loops > 0 ? asked.draft_loops : base.draft_loops > 0 ? base.draft_loops : depth_ / 2;
  Status refused = speculation_refusal(r);
  if (!refused.ok() && !asked.method) {
    // Speculation the request did not ask for (the engine's default) gives way to what it did ask
    // for: it decodes plainly, with the same output.
    s.method = SpeculativeMethod::kOff;
    return {};
  }
  return refused;
}

Status Scheduler::speculation_refusal(const Request& r) const {
  const Speculation& s = r.spec;
  const std::string_view method = name(s.method);
  // Drafts are verified by running them through every loop: exactly plain decoding when plain
  // decoding runs every loop too. What would make a token's depth differ is refused.
  if (r.exit.threshold < 1.0) {
    return invalid_argument(fmt::format(
        "speculative decoding ({}) verifies drafts at the model's full depth, and a verified token's exit would "
        "need every loop's gate inside that pass: exit_threshold {} < 1 is not supported with it; use "
        "exit_threshold 1 or speculative method off",
        method, r.exit.threshold));
  }
  if (r.exit.max_loops < depth_) {
    return invalid_argument(fmt::format("speculative decoding ({}) verifies drafts at the model's full depth {}; "
                                        "max_loops {} would stop tokens earlier: drop max_loops or speculation",
                                        method, depth_, r.exit.max_loops));
  }
  if (config_.exit_mode == ExitMode::kTrace) {
    return invalid_argument(fmt::format("speculative decoding ({}) verifies at full depth; exit policy trace gives "
                                        "depths per token: use exit policy ouro or ouro_delayed",
                                        method));
  }
  if (kv_.config().layout == kv::KVLayout::kShared && depth_ > 1) {
    return invalid_argument(fmt::format(
        "speculative decoding ({}) verifies several positions in one pass, loop by loop; the shared KV layout "
        "overwrites a position's K/V every loop, so a later position would read the wrong loop's: use "
        "--kv-layout last_exited",
        method));
  }
  if (s.method == SpeculativeMethod::kSelf && (depth_ < 2 || s.draft_loops >= depth_)) {
    return invalid_argument(
        depth_ < 2 ? fmt::format("self drafting runs fewer loops than the model; this model runs {} loop: use "
                                 "speculative method ngram",
                                 depth_)
                   : fmt::format("draft_loops must be in [1, {}] (below the model's depth {}), got {}", depth_ - 1,
                                 depth_, s.draft_loops));
  }
  return {};
}

Status Scheduler::add_request(Request r) {
  if (requests_.count(r.id)) {
    return already_exists(fmt::format("request id {} is already live; ids may be reused only after the request "
                                      "finished or was aborted", r.id));
  }
  if (r.prompt.empty()) return invalid_argument("the prompt is empty: at least one token is needed");
  auto blocks = kv_.required_blocks(r.prompt_len(), r.params.max_tokens);
  if (!blocks.ok()) return blocks.status();
  if (*blocks > kv_.num_blocks()) {
    return invalid_argument(fmt::format("the request needs {} KV blocks over its life (prompt {} + max_tokens {} - 1 "
                                        "tokens, {} planes) but the cache has only {}; lower max_tokens or give "
                                        "the cache more memory", *blocks, r.prompt_len(), r.params.max_tokens,
                                        kv_.num_planes(), kv_.num_blocks()));
  }
  if (config_.exit_mode == ExitMode::kTrace) {
    if (static_cast<int64_t>(r.exit_trace.size()) < r.params.max_tokens)
      return invalid_argument("exit_trace must give a depth for every output token");
    if (r.exit_trace[0] != depth_)
      return invalid_argument(fmt::format("exit_trace must start with the model depth {} (the prefill)", depth_));
    for (size_t i = 1; i < r.exit_trace.size(); ++i)
      if (const int32_t d = r.exit_trace[i]; d < r.exit.min_loops || d > r.exit.max_loops)
        return invalid_argument(fmt::format("exit_trace depth {} is outside [min_loops {}, max_loops {}]", d,
                                            r.exit.min_loops, r.exit.max_loops));
  }
  RLT_RETURN_IF_ERROR(resolve_speculation(r));
  r.arrival = next_arrival_++;
  r.stage = Stage::kWaiting;  // not counted yet: it enters the map below
  const RequestId id = r.id;
  requests_.emplace(id, std::make_unique<Request>(std::move(r)));
  queue(Stage::kWaiting).push_back(id);
  return {};
}

const Request* Scheduler::find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::optional<Request> Scheduler::take_finished(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || !it->second->finished()) return std::nullopt;
  Request r = std::move(*it->second);
  requests_.erase(it);
  return r;
}

bool Scheduler::has_unfinished() const {
  for (const auto& [_, r] : requests_)
    if (!r->finished()) return true;
  return false;
}

void Scheduler::set_stage(Request& r, Stage stage) {
  auto running = [](Stage s) { return s != Stage::kWaiting && s != Stage::kFinished; };
  running_ += static_cast<int32_t>(running(stage)) - static_cast<int32_t>(running(r.stage));
  r.stage = stage;
}

int32_t Scheduler::num_suspended() const {
  int32_t n = 0;
  for (const auto& [_, r] : requests_) n += r->suspended != nullptr;
  return n;
}

void Scheduler::remove_from_queues(RequestId id) {
  for (auto& q : queues_) q.erase(std::remove(q.begin(), q.end(), id), q.end());
}

void Scheduler::finish(Request& r, FinishReason reason) {
  remove_from_queues(r.id);
  kv_.free(r.id);
  if (r.suspended) {
    suspended_bytes_ -= static_cast<int64_t>(r.suspended->host_bytes);
    r.suspended.reset();
  }
  r.finish = reason;
  set_stage(r, Stage::kFinished);
}

Status Scheduler::abort(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->finished()) {
    return not_found(fmt::format("no live request with id {}", id));
  }
  finish(*it->second, FinishReason::kAbort);
  return {};
}

// ---- stage choice -------------------------------------------------------------------------------

bool Scheduler::ready(Stage s) const {
  return !queue(s).empty() && (tried_stages_ & (1u << static_cast<unsigned>(s))) == 0;
}

Stage Scheduler::decode_stage() const {
  const bool recurrent = ready(Stage::kRecurrent), verify = ready(Stage::kVerify);
  if (recurrent && verify) return last_decode_ == Stage::kRecurrent ? Stage::kVerify : Stage::kRecurrent;
  if (recurrent) return Stage::kRecurrent;
  return verify ? Stage::kVerify : Stage::kWaiting;
}

bool Scheduler::first_token_in_coda() const {
  for (RequestId id : queue(Stage::kCoda)) {
    auto it = requests_.find(id);
    if (it != requests_.end() && it->second->output_tokens.empty()) return true;
  }
  return false;
}

Stage Scheduler::choose_stage_refill() const {
  const bool decode_due = prefill_batches_since_recurrent_ >= config_.max_prefill_batches_before_decode;
  if (ready(Stage::kPrelude)) return Stage::kPrelude;
  // A CODA that costs a loop or more (Huginn reads out through attending blocks, then runs an
  // attending prelude) streams its weights whatever its rows: tokens that left the loop wait
  // until they are as many as those still looping, or the loop is idle, and go out together. A
  // prompt's first token never waits (time to first token).
  const bool gather = config_.gather_exited_tokens && ready(Stage::kRecurrent) &&
                      queue(Stage::kCoda).size() < queue(Stage::kRecurrent).size() && !first_token_in_coda();
  if (ready(Stage::kCoda) && !gather) return Stage::kCoda;
  const Stage decode = decode_stage();
  if (decode_due && decode != Stage::kWaiting) return decode;
  if (ready(Stage::kPrefill)) return Stage::kPrefill;
  return decode;  // kWaiting: nothing to run
}

Stage Scheduler::choose_stage_no_refill() {
  // Cohorts: FILL admits and prefills; CORE runs the recurrent batch until it is empty (exited
  // tokens wait in CODA for their cohort); CODA drains; then FILL again.
  if (phase_ == Phase::kCore) {
    if (!queue(Stage::kRecurrent).empty()) return ready(Stage::kRecurrent) ? Stage::kRecurrent : Stage::kWaiting;
    if (any_awaiting_decision()) return Stage::kWaiting;  // the cohort is still in the loop
    phase_ = Phase::kCoda;
  }
  if (phase_ == Phase::kCoda) {
    if (ready(Stage::kCoda)) return Stage::kCoda;
    phase_ = Phase::kFill;
  }
  const bool decode_due = prefill_batches_since_recurrent_ >= config_.max_prefill_batches_before_decode;
  if (decode_due && ready(Stage::kPrelude)) return Stage::kPrelude;
  if (ready(Stage::kPrefill)) return Stage::kPrefill;
  if (ready(Stage::kCoda)) return Stage::kCoda;
  if (ready(Stage::kPrelude)) return Stage::kPrelude;
  if (ready(Stage::kVerify)) return Stage::kVerify;  // a whole step in one batch: no cohort to wait for
  if (ready(Stage::kRecurrent)) {
    phase_ = Phase::kCore;
    return Stage::kRecurrent;
  }
  return Stage::kWaiting;
}

Result<std::optional<SchedulerOutput>> Scheduler::schedule() {
  if (!has_unfinished()) return std::optional<SchedulerOutput>();
  RLT_RETURN_IF_ERROR(admit());
  // A stage comes back empty when KV growth failed for all its candidates: try the others.
  tried_stages_ = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    const Stage stage = config_.mode == BatchMode::kRefill ? choose_stage_refill() : choose_stage_no_refill();
    if (stage == Stage::kWaiting) break;
    RLT_ASSIGN_OR_RETURN(SchedulerOutput out, take(stage));
    if (out.items.empty()) {
      tried_stages_ |= 1u << static_cast<unsigned>(stage);
      continue;
    }
    if (stage == Stage::kPrefill) ++prefill_batches_since_recurrent_;
    if (stage == Stage::kRecurrent || stage == Stage::kVerify) {
      prefill_batches_since_recurrent_ = 0;
      last_decode_ = stage;
    }
    out.seq = next_seq_++;
    ++counters_.batches;
    if (stage == Stage::kRecurrent) {
      ++counters_.recurrent_batches;
      const bool mixed = std::any_of(out.items.begin(), out.items.end(),
                                     [&](const ScheduledItem& i) { return i.depth != out.items.front().depth; });
      counters_.mixed_depth_batches += mixed;
    }
    return std::optional<SchedulerOutput>(std::move(out));
  }
  return std::optional<SchedulerOutput>();
}

// ---- admission ----------------------------------------------------------------------------------

int32_t Scheduler::reserved_growth_blocks() const {
  // Without preemption, growth can never be taken back: reserve every running request's whole
  // remaining life. With preemption, only prompts still prefilling are reserved.
  int64_t reserved = 0;
  for (const auto& [id, r] : requests_) {
    if (r->stage == Stage::kWaiting || r->finished() || !kv_.has_allocation(id)) continue;
    const int32_t tokens = config_.enable_preemption ? r->prompt_len() : r->capacity_tokens();
    const int64_t need = kv::blocks_for_tokens(tokens, kv_.block_size(), kv_.num_planes());
    auto have = kv_.allocated_blocks(id);
    if (have.ok() && need > *have) reserved += need - *have;
  }
  return static_cast<int32_t>(reserved);
}

Result<bool> Scheduler::try_admit(Request& r, int32_t reserved_blocks) {
  if (r.suspended) {
    Status s = hooks_->resume_kv(r.id, r.suspended->kv);
    if (s.code() == ErrorCode::kResourceExhausted) return false;
    RLT_RETURN_IF_ERROR(s);
    set_stage(r, r.suspended->stage);
    suspended_bytes_ -= static_cast<int64_t>(r.suspended->host_bytes);
    r.suspended.reset();
    ++counters_.resumptions;
    queue(r.stage).push_back(r.id);
    return true;
  }
  // A request that scores its prompt computes every row: it neither reads nor feeds the cache.
  const bool shares_prefix = !r.params.prompt_logprobs;
  // Empty when there is nothing to hash (no prefix caching, no full page): recomputing that is
  // free.
  if (shares_prefix && r.page_digests.empty()) r.page_digests = kv_.prompt_page_digests(r.prompt);
  kv::AllocateRequest ask;
  ask.id = r.id;
  ask.capacity_tokens = r.capacity_tokens();
  if (shares_prefix) ask.prompt = r.prompt;
  ask.page_digests = r.page_digests;
  ask.reserved_blocks = reserved_blocks;
  if (config_.incremental_kv) {
    const int32_t cached = shares_prefix ? kv_.lookup_prefix(r.prompt, {}, r.page_digests).cached_tokens : 0;
    ask.initial_tokens = std::min(r.prompt_len(), cached + config_.prefill_chunk_size);
    // The request's own growth is promised as the running requests' is: otherwise several
    // requests that each fit their first chunk could together leave none of them room to finish.
    const int32_t life = config_.enable_preemption ? r.prompt_len() : r.capacity_tokens();
    const int64_t own = kv::blocks_for_tokens(life, kv_.block_size(), kv_.num_planes()) -
                        kv::blocks_for_tokens(ask.initial_tokens, kv_.block_size(), kv_.num_planes());
    if (own > 0) ask.reserved_blocks += static_cast<int32_t>(own);
  }
  RLT_ASSIGN_OR_RETURN(kv::AdmissionPlan plan, kv_.can_allocate(ask));
  if (!plan.fits) return false;
  RLT_ASSIGN_OR_RETURN(kv::Admission admitted, kv_.allocate(ask));
  r.num_prefilled = admitted.cached_tokens;
  set_stage(r, Stage::kPrefill);
  queue(Stage::kPrefill).push_back(r.id);
  return true;
}

bool Scheduler::awaits_shared_page(Request& r) {
  if (r.suspended || r.params.prompt_logprobs || !kv_.config().enable_prefix_caching) return false;
  if (r.page_digests.empty()) r.page_digests = kv_.prompt_page_digests(r.prompt);
  for (const auto& [id, q] : requests_) {
    if (id == r.id || q->stage != Stage::kPrefill || q->suspended) continue;
    // q writes its pages in order and publishes each once written, so the one to wait for is
    // its first unwritten page; digests chain the whole prefix, so equal keys there mean equal
    // prompts up to that page's end (every earlier page already in the cache).
    const auto page = static_cast<size_t>(q->num_prefilled / kv_.block_size());
    if (page < r.page_digests.size() && page < q->page_digests.size() && q->page_digests[page] == r.page_digests[page])
      return true;
  }
  return false;
}

Status Scheduler::admit() {
  auto& waiting = queue(Stage::kWaiting);
  if (waiting.empty()) return {};
  std::vector<RequestId> order(waiting.begin(), waiting.end());
  if (config_.policy == QueuePolicy::kPriority) {
    std::stable_sort(order.begin(), order.end(), [&](RequestId a, RequestId b) {
      return at(a).params.priority < at(b).params.priority;
    });
  }
  const size_t scan = std::min<size_t>(order.size(), static_cast<size_t>(config_.admission_scan_limit));
  std::vector<RequestId> admitted, deferred;
  for (size_t i = 0; i < scan; ++i) {
    Request& r = at(order[i]);
    // Before any preemption on its behalf, and outside the bypass rules: it waits for a running
    // request, not for room, and holding the scan behind it would stall every other admission.
    if (awaits_shared_page(r)) {
      ++counters_.shared_prefix_waits;
      continue;
    }
    if (num_running() >= config_.max_num_seqs) {
      bool freed = false;
      if (config_.policy == QueuePolicy::kPriority && config_.enable_preemption && hooks_) {
        RLT_ASSIGN_OR_RETURN(freed, preempt_for(r, {}, /*priority_only=*/true));
      }
      if (!freed) break;
    }
    const bool was_suspended = r.suspended != nullptr;
    RLT_ASSIGN_OR_RETURN(bool ok, try_admit(r, was_suspended ? 0 : reserved_growth_blocks()));
    if (ok) {
      admitted.push_back(r.id);
      if (!was_suspended) {
        // Bounded bypass: everyone deferred earlier in this scan has now been overtaken once.
        bool limit = false;
        for (RequestId d : deferred) limit |= ++at(d).admission_bypasses >= config_.max_admission_bypasses;
        if (limit) break;
      }
    } else {
      ++counters_.admission_deferrals;
      deferred.push_back(r.id);
      if (!was_suspended && r.admission_bypasses >= config_.max_admission_bypasses) break;
    }
  }
  // Admitted requests leave the waiting queue; everyone else keeps their place.
  waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                               [&](RequestId id) {
                                 return std::find(admitted.begin(), admitted.end(), id) != admitted.end();
                               }),
                waiting.end());
  return {};
}

// ---- batch building -----------------------------------------------------------------------------

Result<bool> Scheduler::grow(Request& r, int32_t tokens, const std::vector<RequestId>& excluded) {
  Status s = kv_.ensure_capacity(r.id, tokens);
  if (s.ok()) return true;
  if (s.code() != ErrorCode::kResourceExhausted) return s;
  if (!config_.enable_preemption || hooks_ == nullptr) return false;
  RLT_ASSIGN_OR_RETURN(bool freed, preempt_for(r, excluded, /*priority_only=*/false));
  if (!freed) return false;
  s = kv_.ensure_capacity(r.id, tokens);
  if (s.ok()) return true;
  if (s.code() != ErrorCode::kResourceExhausted) return s;
  return false;
}

Result<SchedulerOutput> Scheduler::take(Stage stage) {
  SchedulerOutput out;
  out.stage = stage;
  auto& q = queue(stage);
  int64_t budget = config_.max_num_batched_tokens;
  std::vector<RequestId> selected, retry;
  const size_t scan = q.size();
  for (size_t i = 0; i < scan && budget > 0 && static_cast<int32_t>(out.items.size()) < config_.max_num_seqs; ++i) {
    // Growth may preempt a request still waiting further down this very queue.
    if (q.empty()) break;
    const RequestId id = q.front();
    q.pop_front();
    Request& r = at(id);
    ScheduledItem item;
    item.id = id;
    item.arrival = r.arrival;
    int32_t frontier = 0;
    if (stage == Stage::kPrefill) {
      item.token_start = r.num_prefilled;
      item.token_count = static_cast<int32_t>(std::min<int64_t>(
          {budget, config_.prefill_chunk_size, r.prompt_len() - r.num_prefilled}));
      item.position = item.token_start;
      frontier = item.token_start + item.token_count;
    } else if (stage == Stage::kVerify) {
      // The last sampled token's row; its drafts are planned once the batch's requests are known.
      item.position = item.token_start = r.position();
      frontier = item.position + 1;
    } else {
      item.position = r.feed_position();
      item.depth = r.loops_done;
      if (stage == Stage::kPrelude) frontier = item.position + 1;
    }
    if (frontier > 0 && stage == Stage::kPrelude && r.spec.drafting) {
      // A self draft takes free pages only, never a preemption: without one, the cycle ends with
      // the drafts made so far.
      const Status grown = kv_.ensure_capacity(r.id, frontier);
      if (grown.code() == ErrorCode::kResourceExhausted) {
        end_draft_cycle(r);
        continue;
      }
      RLT_RETURN_IF_ERROR(grown);
    } else if (frontier > 0) {
      // Neither the batch's rows nor the requests waiting for a retry may be preempted for it.
      std::vector<RequestId> excluded = selected;
      excluded.insert(excluded.end(), retry.begin(), retry.end());
      RLT_ASSIGN_OR_RETURN(bool grown, grow(r, frontier, excluded));
      if (!grown) {
        retry.push_back(id);  // back to the tail: others may still fit
        continue;
      }
    }
    budget -= item.token_count;
    selected.push_back(id);
    out.items.push_back(item);
  }
  for (RequestId id : retry)
    if (at(id).stage == stage) q.push_back(id);  // unless a later growth preempted it after all
  if (stage == Stage::kVerify && !out.items.empty()) {
    RLT_RETURN_IF_ERROR(plan_drafts(out, budget + static_cast<int64_t>(out.items.size())));
  }
  return out;
}

Status Scheduler::plan_drafts(SchedulerOutput& out, int64_t row_budget) {
  const size_t n = out.items.size();
  std::vector<spec::DraftOffer> offers(n);
  bool any_ngram = false;
  for (size_t i = 0; i < n; ++i) {
    Request& r = at(out.items[i].id);
    std::vector<int32_t>& drafts = r.spec.drafts;
    // A verification gives its drafts' count + 1 tokens at most: never more than max_tokens allows,
    // so the rows stay inside the request's KV capacity.
    const int32_t room = static_cast<int32_t>(r.params.max_tokens - static_cast<int64_t>(r.output_tokens.size()) - 1);
    const int32_t cap = std::max(0, std::min(r.spec.max_drafts, room));
    if (r.spec.method == SpeculativeMethod::kNgram) {
      drafts.clear();
      ngram_.propose(r.prompt, r.output_tokens, cap, drafts);
      any_ngram = true;
    } else if (static_cast<int32_t>(drafts.size()) > cap) {
      drafts.resize(static_cast<size_t>(cap));
    }
    offers[i] = {static_cast<int32_t>(drafts.size()), r.spec.acceptance.rate()};
  }
  std::vector<int32_t> take(n, 0);
  if (config_.speculative.adaptive) {
    take = spec::allocate_drafts(offers, verify_cost_.fixed(), verify_cost_.per_row(), row_budget);
    // A self request's next cycle makes no more drafts than a batch like this one would verify
    // (its drafts cost loops before they are offered: drafts dropped here were paid for in vain).
    std::vector<spec::DraftOffer> full = offers;
    bool any_self = false;
    for (size_t i = 0; i < n; ++i) {
      const Request& r = at(out.items[i].id);
      if (r.spec.method != SpeculativeMethod::kSelf) continue;
      full[i].available = r.spec.max_drafts;
      any_self = true;
    }
    if (any_self) {
      const std::vector<int32_t> would =
          spec::allocate_drafts(full, verify_cost_.fixed(), verify_cost_.per_row(), row_budget);
      for (size_t i = 0; i < n; ++i) at(out.items[i].id).spec.cycle_cap = would[i];
    }
    // Passes whose rows never vary leave the per-row cost unknown: now and then one verifies half
    // its lookup drafts (free to drop, unlike self drafts already computed).
    if (any_ngram && verify_cost_.needs_variation() && verify_batches_ % 4 == 3) {
      for (size_t i = 0; i < n; ++i)
        if (at(out.items[i].id).spec.method == SpeculativeMethod::kNgram) take[i] /= 2;
    }
  } else {
    int64_t rows = static_cast<int64_t>(n);
    for (size_t i = 0; i < n; ++i) {
      take[i] = static_cast<int32_t>(std::min<int64_t>(offers[i].available, row_budget - rows));
      rows += take[i];
    }
  }
  ++verify_batches_;
  for (size_t i = 0; i < n; ++i) {
    ScheduledItem& item = out.items[i];
    Request& r = at(item.id);
    int32_t k = take[i];
    // Drafts are a bet: they take free KV pages only, never a preemption.
    while (k > 0) {
      const Status grown = kv_.ensure_capacity(r.id, item.position + 1 + k);
      if (grown.ok()) break;
      if (grown.code() != ErrorCode::kResourceExhausted) return grown;
      --k;
    }
    r.spec.drafts.resize(static_cast<size_t>(k));
    item.token_count = 1 + k;
    if (k == 0) r.spec.acceptance.idle();
  }
  return {};
}

// ---- preemption ---------------------------------------------------------------------------------

Result<bool> Scheduler::preempt_for(const Request& requester, const std::vector<RequestId>& excluded,
                                    bool priority_only) {
  Request* victim = nullptr;
  int64_t victim_blocks = -1;
  for (auto& [id, rp] : requests_) {
    Request& r = *rp;
    if (id == requester.id || r.stage == Stage::kWaiting || r.finished() || r.suspended) continue;
    if (std::find(excluded.begin(), excluded.end(), id) != excluded.end()) continue;
    if (kv_.has_transfer_lease(id) || !kv_.has_allocation(id)) continue;
    // Asynchronous scheduling: batches still queued on the runner write this request's KV.
    if (r.in_flight > 0 || r.awaiting_decision) continue;
    if (priority_only && r.params.priority <= requester.params.priority) continue;
    auto blocks = kv_.allocated_blocks(id);
    const int64_t b = blocks.ok() ? *blocks : 0;
    // Largest (priority value, footprint) first: the least urgent, then the one that frees most.
    if (!victim || r.params.priority > victim->params.priority ||
        (r.params.priority == victim->params.priority && b > victim_blocks)) {
      victim = &r;
      victim_blocks = b;
    }
  }
  if (victim == nullptr) return false;
  RLT_ASSIGN_OR_RETURN(kv::KVSnapshot snap, hooks_->snapshot_kv(victim->id));
  const size_t bytes = snap.keys.size() + snap.values.size();
  if (suspended_bytes_ + static_cast<int64_t>(bytes) > config_.preemption_host_bytes) return false;
  remove_from_queues(victim->id);
  kv_.free(victim->id);
  // A self draft cycle ends here: the drafts made so far are verified after the resume (their
  // K/V were provisional; verification computes every row again).
  Stage resume_stage = victim->stage;
  if (victim->spec.drafting) {
    victim->spec.drafting = false;
    resume_stage = Stage::kVerify;
  }
  victim->suspended = std::make_unique<Suspended>(Suspended{resume_stage, std::move(snap), bytes});
  suspended_bytes_ += static_cast<int64_t>(bytes);
  set_stage(*victim, Stage::kWaiting);
  queue(Stage::kWaiting).push_front(victim->id);
  ++counters_.preemptions;
  return true;
}

// ---- results ------------------------------------------------------------------------------------

bool Scheduler::exit_now(Request& r, float gate_logit, double exit_value) {
  const int32_t loops = r.loops_done;  // already incremented: loops run for this token
  if (r.spec.drafting) return loops >= r.spec.draft_loops;
  if (r.exit.criterion != model::ExitCriterion::kGate && config_.exit_mode != ExitMode::kTrace)
    return model::criterion_exit_step(r.exit, loops, exit_value);
  switch (config_.exit_mode) {
    case ExitMode::kTrace:
      return loops >= r.exit_trace[r.output_tokens.size()];
    case ExitMode::kOuroDelayed: {
      if (r.pending_exit_depth > 0 && loops >= r.pending_exit_depth) return true;
      const bool fired = model::ouro_exit_step(r.exit, loops, gate_logit, &r.remaining);
      if (loops >= r.exit.max_loops) return true;
      // The signal of loop r arrives one loop late: the exit happens after loop r + 1.
      if (fired && r.pending_exit_depth == 0) r.pending_exit_depth = static_cast<int32_t>(std::min<int64_t>(loops + 1, r.exit.max_loops));
      return false;
    }
    case ExitMode::kOuro:
    default:
      return model::ouro_exit_step(r.exit, loops, gate_logit, &r.remaining);
  }
}

void Scheduler::apply_prefill(Request& r, const ScheduledItem& item) {
  r.num_prefilled = item.token_start + item.token_count;
  set_stage(r, r.num_prefilled == r.prompt_len() ? Stage::kCoda : Stage::kPrefill);
  r.loops_done = depth_;  // the prompt's last token ran every loop
  queue(r.stage).push_back(r.id);
}

void Scheduler::start_token(Request& r) {
  r.loops_done = 0;
  r.remaining = 1.0;
  r.pending_exit_depth = 0;
  r.signals_applied = 0;
  r.awaiting_decision = false;
  set_stage(r, Stage::kRecurrent);
  queue(Stage::kRecurrent).push_back(r.id);
}

Status Scheduler::exit_loop(Request& r, int32_t position, StepUpdate& update) {
  // A draft's K/V are provisional (verification writes every loop of its row): nothing to copy.
  if (r.loops_done < depth_ && !r.spec.drafting) {
    // The KV manager counts depths from 0: the exit plane is loops_done - 1.
    RLT_RETURN_IF_ERROR(kv_.plan_finalize(r.id, position, r.loops_done - 1, &update.finalize_copies));
    update.exited.push_back({r.id, position, r.loops_done});
  }
  set_stage(r, Stage::kCoda);
  queue(Stage::kCoda).push_back(r.id);
  return {};
}

Status Scheduler::apply_signal(Request& r, int32_t loops, float gate_logit) {
  if (loops != r.signals_applied + 1) {
    return internal_error(fmt::format("stale lookahead signal: request {} got the exit signal of loop {} after that "
                                      "of loop {}", r.id, loops, r.signals_applied));
  }
  r.signals_applied = loops;
  if (config_.exit_mode != ExitMode::kOuroDelayed) return {};  // trace: depths are given
  const bool fired = model::ouro_exit_step(r.exit, loops, gate_logit, &r.remaining);
  if (fired && r.pending_exit_depth == 0) {
    r.pending_exit_depth = static_cast<int32_t>(std::min<int64_t>(loops + 1, r.exit.max_loops));
  }
  return {};
}

Status Scheduler::try_decide(Request& r, StepUpdate& update) {
  if (!r.awaiting_decision) return {};
  const int32_t loops = r.loops_done;  // submitted for this token
  bool exit = false;
  if (r.spec.drafting) {
    exit = loops >= r.spec.draft_loops;
  } else if (config_.exit_mode == ExitMode::kTrace) {
    exit = loops >= r.exit_trace[r.output_tokens.size()];
  } else if (loops >= r.exit.max_loops) {
    exit = true;
  } else {
    // A signal decides one loop late: whether loop `loops + 1` runs needs signals 1..loops - 1.
    if (r.signals_applied < loops - 1) return {};
    exit = r.pending_exit_depth > 0 && loops >= r.pending_exit_depth;
  }
  r.awaiting_decision = false;
  if (exit) return exit_loop(r, r.position(), update);
  queue(Stage::kRecurrent).push_back(r.id);
  return {};
}

bool Scheduler::any_awaiting_decision() const {
  for (const auto& [_, r] : requests_)
    if (r->awaiting_decision) return true;
  return false;
}

Result<StepUpdate> Scheduler::on_submitted(const SchedulerOutput& batch) {
  if (!config_.async_scheduling) return internal_error("on_submitted is only for asynchronous scheduling");
  StepUpdate update;
  for (const ScheduledItem& item : batch.items) {
    auto it = requests_.find(item.id);
    if (it == requests_.end() || it->second->finished() || it->second->arrival != item.arrival) continue;
    Request& r = *it->second;
    ++r.in_flight;
    switch (batch.stage) {
      case Stage::kPrefill:
        // `written` marks enqueued writes: later batches on the runner's queue see them.
        RLT_RETURN_IF_ERROR(kv_.record_written_all_depths(r.id, item.token_start, item.token_count));
        apply_prefill(r, item);
        break;
      case Stage::kPrelude:
        start_token(r);
        break;
      case Stage::kRecurrent:
        // A draft's K/V are provisional: recorded, with every loop, once verification keeps them.
        if (!r.spec.drafting) RLT_RETURN_IF_ERROR(kv_.record_written(r.id, item.depth, item.position, 1));
        r.loops_done = item.depth + 1;
        r.awaiting_decision = true;
        RLT_RETURN_IF_ERROR(try_decide(r, update));
        break;
      case Stage::kCoda:
      case Stage::kVerify:
        break;  // the tokens come with the results
      default:
        return internal_error(fmt::format("batch of stage {} cannot be submitted", stage_name(batch.stage)));
    }
  }
  return update;
}

Result<StepUpdate> Scheduler::update_from_output(const SchedulerOutput& batch, const RunnerOutput& out) {
  if (out.seq != batch.seq || out.stage != batch.stage) {
    return internal_error(fmt::format("runner output for batch {} ({}) does not match batch {} ({})", out.seq,
                                      stage_name(out.stage), batch.seq, stage_name(batch.stage)));
  }
  const bool async = config_.async_scheduling;
  StepUpdate update;
  // VERIFY: where each item's tokens start in `sampled`.
  std::vector<size_t> verified_at;
  if (batch.stage == Stage::kVerify) {
    if (out.emitted.size() != batch.items.size())
      return internal_error(fmt::format("a VERIFY batch of {} items got {} token counts", batch.items.size(),
                                        out.emitted.size()));
    size_t at = 0;
    for (int32_t e : out.emitted) {
      verified_at.push_back(at);
      at += static_cast<size_t>(std::max(0, e));
    }
    if (at != out.sampled.size())
      return internal_error(fmt::format("a VERIFY batch counts {} tokens but carries {}", at, out.sampled.size()));
  }
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ScheduledItem& item = batch.items[i];
    auto it = requests_.find(item.id);
    // Aborted meanwhile (its id perhaps already reused by a new request): ignore.
    if (it == requests_.end() || it->second->finished() || it->second->arrival != item.arrival) continue;
    Request& r = *it->second;
    if (async) r.in_flight = std::max(0, r.in_flight - 1);
    switch (batch.stage) {
      case Stage::kPrefill:
        if (async) break;  // applied at submission
        RLT_RETURN_IF_ERROR(kv_.record_written_all_depths(r.id, item.token_start, item.token_count));
        apply_prefill(r, item);
        break;
      case Stage::kPrelude:
        if (!async) start_token(r);
        break;
      case Stage::kRecurrent:
        if (async) {
          // A token that already left the loop (its exit was decided from earlier signals) no
          // longer needs the signals of its last loops.
          if (r.stage != Stage::kRecurrent) break;
          RLT_RETURN_IF_ERROR(apply_signal(r, item.depth + 1, out.gate_logits.at(i)));
          RLT_RETURN_IF_ERROR(try_decide(r, update));
          break;
        }
        if (!r.spec.drafting) RLT_RETURN_IF_ERROR(kv_.record_written(r.id, item.depth, item.position, 1));
        r.loops_done = item.depth + 1;
        if (exit_now(r, out.gate_logits.at(i), out.exit_values.empty() ? 0.0 : out.exit_values.at(i))) {
          RLT_RETURN_IF_ERROR(exit_loop(r, item.position, update));
        } else {
          queue(Stage::kRecurrent).push_back(r.id);
        }
        break;
      case Stage::kCoda: {
        const int32_t token = out.sampled.at(i);
        RLT_RETURN_IF_ERROR(record_outer_written(r));
        if (r.spec.drafting) {
          // A self draft: proposed, not emitted. The cycle goes on until its drafts are made; a
          // row that could not be sampled (-1) ends it with the drafts made so far.
          if (token >= 0) r.spec.drafts.push_back(token);
          if (token >= 0 && static_cast<int32_t>(r.spec.drafts.size()) < r.spec.cycle_drafts) {
            set_stage(r, Stage::kPrelude);
            queue(Stage::kPrelude).push_back(r.id);
          } else {
            end_draft_cycle(r);
          }
          break;
        }
        if (!emit_token(r, token, r.loops_done, update)) begin_cycle(r);
        break;
      }
      case Stage::kVerify: {
        const auto count = static_cast<size_t>(std::max(0, out.emitted[i]));
        // No token: its first row could not be sampled, and the engine ends the request (after
        // this update, so that a later failing row keeps the tokens before it).
        if (count == 0) break;
        RLT_RETURN_IF_ERROR(apply_verify(
            r, item, std::span<const int32_t>(out.sampled).subspan(verified_at[i], count), update));
        break;
      }
      default:
        return internal_error(fmt::format("batch of stage {} cannot be applied", stage_name(batch.stage)));
    }
  }
  return update;
}

Status Scheduler::record_outer_written(const Request& r) {
  const kv::KVCacheConfig& c = kv_.config();
  const int32_t position = r.feed_position();
  for (int32_t depth = c.depth; depth < c.depth + c.outer_planes; ++depth) {
    // The prompt's last position was recorded with the prompt.
    RLT_ASSIGN_OR_RETURN(bool written, kv_.token_written(r.id, position, depth));
    if (!written) RLT_RETURN_IF_ERROR(kv_.record_written(r.id, depth, position, 1));
  }
  return {};
}

bool Scheduler::stops(const Request& r, int32_t token) const {
  const auto& ids = r.params.stop_token_ids;
  const bool eos = !r.params.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
  return eos || std::find(ids.begin(), ids.end(), token) != ids.end();
}

bool Scheduler::emit_token(Request& r, int32_t token, int32_t depth, StepUpdate& update) {
  r.output_tokens.push_back(token);
  r.exit_depths.push_back(depth);
  if (update.new_tokens.empty() || update.new_tokens.back() != r.id) update.new_tokens.push_back(r.id);
  const bool stop = stops(r, token);
  if (!stop && static_cast<int64_t>(r.output_tokens.size()) < r.params.max_tokens) return false;
  finish(r, stop ? FinishReason::kStop : FinishReason::kLength);
  update.finished.push_back(r.id);
  return true;
}

void Scheduler::end_draft_cycle(Request& r) {
  r.spec.drafting = false;
  set_stage(r, Stage::kVerify);
  queue(Stage::kVerify).push_back(r.id);
}

void Scheduler::begin_cycle(Request& r) {
  Speculation& s = r.spec;
  s.drafts.clear();
  Stage next = Stage::kPrelude;
  if (s.method == SpeculativeMethod::kNgram) {
    next = Stage::kVerify;  // the lookup drafts are proposed when the batch is built
  } else if (s.method == SpeculativeMethod::kSelf) {
    s.cycle_drafts = self_cycle_drafts(r);
    s.drafting = s.cycle_drafts > 0;
    if (!s.drafting) s.acceptance.idle();
    // Without drafts the verification is the plain step: the token through every loop.
    next = s.drafting ? Stage::kPrelude : Stage::kVerify;
  }
  set_stage(r, next);
  queue(next).push_back(r.id);
}

int32_t Scheduler::self_cycle_drafts(const Request& r) const {
  const Speculation& s = r.spec;
  const int32_t room = static_cast<int32_t>(r.params.max_tokens - static_cast<int64_t>(r.output_tokens.size()) - 1);
  if (!config_.speculative.adaptive) return std::max(0, std::min(s.max_drafts, room));
  const int32_t cap = std::max(0, std::min({s.max_drafts, room, s.cycle_cap}));
  // Tokens per second: a cycle of k drafts costs k drafts (draft_loops loops and a CODA of one
  // row each) and a verification of k + 1 rows (a + b·(k + 1), the measured cost of a VERIFY
  // pass), and expects 1 + α + ... + α^k tokens; k = 0 is the plain step (a + b). A draft costs
  // the share of a one-row pass its loops are. Until b is known, rows are taken as free (the
  // memory-bound case).
  const double alpha = s.acceptance.rate(), coda = config_.coda_loops;
  const double a = verify_cost_.fixed(), b = verify_cost_.per_row();
  const double draft = (a + b) * (s.draft_loops + coda) / (depth_ + coda);
  // Drafting must beat the plain step's rate by the margin verifications ask of a draft.
  int32_t best = 0;
  double best_rate = spec::kRequiredReturn / (a + b), expected = 1.0, term = 1.0;
  for (int32_t k = 1; k <= cap; ++k) {
    term *= alpha;
    expected += term;
    const double rate = expected / (k * draft + a + b * (k + 1));
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

Status Scheduler::apply_verify(Request& r, const ScheduledItem& item, std::span<const int32_t> tokens,
                               StepUpdate& update) {
  const int32_t drafted = item.token_count - 1;
  const std::vector<int32_t>& drafts = r.spec.drafts;
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) > item.token_count ||
      static_cast<int32_t>(drafts.size()) != drafted) {
    return internal_error(fmt::format("request {}: a verification of {} drafts ({} held) gave {} tokens", r.id,
                                      drafted, drafts.size(), tokens.size()));
  }
  int32_t accepted = 0;
  const auto checked = static_cast<int32_t>(std::min<size_t>(tokens.size(), static_cast<size_t>(drafted)));
  while (accepted < checked && tokens[static_cast<size_t>(accepted)] == drafts[static_cast<size_t>(accepted)])
    ++accepted;
  // Every emitted token but the last was a draft the target agreed with: the rows that fed them
  // (the last sampled token, then those drafts) hold this context's K/V at every depth now. The
  // rejected rows' K/V are never recorded: the next pass writes over them.
  if (accepted + 1 < static_cast<int32_t>(tokens.size()))
    return internal_error(fmt::format("request {}: a verification emitted a token after a rejected draft", r.id));
  RLT_RETURN_IF_ERROR(kv_.record_written_all_depths(r.id, item.position, static_cast<int32_t>(tokens.size())));
  r.spec.acceptance.observe(checked, accepted);
  // As vLLM counts them: verifications that had drafts, the drafts proposed, the ones accepted.
  if (drafted > 0) {
    ++counters_.verifications;
    counters_.draft_tokens += drafted;
    counters_.accepted_tokens += accepted;
    counters_.verified_tokens += static_cast<int64_t>(tokens.size());
  }
  r.spec.drafts.clear();
  for (int32_t token : tokens)
    if (emit_token(r, token, depth_, update)) return {};
  begin_cycle(r);
  return {};
}

Status Scheduler::confirm_finalized(const std::vector<ExitedToken>& exited) {
  for (const ExitedToken& e : exited) {
    if (!kv_.has_allocation(e.id)) continue;  // finished or aborted meanwhile
    RLT_RETURN_IF_ERROR(kv_.mark_finalized(e.id, e.position, e.exit_depth - 1));
  }
  return {};
}

}  // namespace rlt::sched
