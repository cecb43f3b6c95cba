// A request as the scheduler tracks it: its stage, its logical progress and its outputs.
// The scheduler owns every Request; other modules see them through the scheduler's views.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "kv/kv_snapshot.h"
#include "kv/kv_types.h"
#include "kv/prefix_digest.h"
#include "model/exit_rule.h"
#include "rlt/sampling_params.h"
#include "spec/draft_budget.h"

namespace rlt::sched {

using RequestId = kv::RequestId;

// WAITING -> PREFILL -> CODA -> (PRELUDE -> RECURRENT x k -> CODA)* -> FINISHED; with speculative
// decoding a request's tokens after the first come from VERIFY (drafts and the token before them
// through every loop in one pass), its self drafts from PRELUDE -> RECURRENT x draft_loops -> CODA.
enum class Stage : uint8_t { kWaiting, kPrefill, kPrelude, kRecurrent, kCoda, kFinished, kVerify };
std::string_view stage_name(Stage stage);

enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort };
std::string_view finish_reason_name(FinishReason reason);  // "", "stop", "length", "abort"

// State saved when a request is preempted: its KV pages on the host and where it was.
struct Suspended {
  Stage stage = Stage::kWaiting;
  kv::KVSnapshot kv;
  size_t host_bytes = 0;
};

// Speculative decoding of one request (docs/speculative.md), resolved at add_request.
struct Speculation {
  SpeculativeMethod method = SpeculativeMethod::kOff;
  int32_t max_drafts = 0;   // K
  int32_t draft_loops = 0;  // self
  // self: the drafts this cycle makes, and whether the token in flight is a draft (its loops stop
  // at draft_loops, its K/V are provisional, its CODA proposes instead of emitting).
  int32_t cycle_drafts = 0;
  bool drafting = false;
  // Adaptive: the drafts the last verification's batch would have verified (self cycles make no
  // more than that).
  int32_t cycle_cap = 0;
  std::vector<int32_t> drafts;  // proposed continuations of output_tokens.back(), verified next
  spec::AcceptanceEstimate acceptance;
  bool enabled() const { return method != SpeculativeMethod::kOff; }
};

struct Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  // The prompt's prefix-cache page keys (with prefix caching), computed at its first admission
  // try and reused by every later one: a prompt is hashed once.
  std::vector<kv::Digest> page_digests;
  SamplingParams params;
  model::ExitParams exit;  // resolved against the model's depth
  uint64_t seed = 0;       // the request's sampling seed (Huginn draws its initial states from it)
  std::vector<int32_t> exit_trace;  // exit mode `trace`: the depth of every output, first = model depth
  uint64_t arrival = 0;    // order of add_request, for FCFS

  Stage stage = Stage::kWaiting;
  int32_t num_prefilled = 0;  // prompt positions whose K/V are written at every depth
  std::vector<int32_t> output_tokens;
  std::vector<int32_t> exit_depths;  // 1-based loops behind each output token
  // The token in flight (PRELUDE/RECURRENT): loops run so far and the exit rule's state.
  int32_t loops_done = 0;
  double remaining = 1.0;          // Π(1 - hazard) of the token in flight (float64)
  int32_t pending_exit_depth = 0;  // ouro_delayed: exit after this many loops (0 = none)
  // Asynchronous scheduling: exit signals applied for the token in flight (loops 1..n), whether
  // the last submitted loop waits for the decision to run another, and submitted batches holding
  // this request whose results are not applied yet.
  int32_t signals_applied = 0;
  bool awaiting_decision = false;
  int32_t in_flight = 0;
  int32_t admission_bypasses = 0;
  FinishReason finish = FinishReason::kNone;
  std::unique_ptr<Suspended> suspended;  // set while preempted
  Speculation spec;

  int32_t prompt_len() const { return static_cast<int32_t>(prompt.size()); }
  // Position of the token being fed back (PRELUDE/RECURRENT): the last sampled token.
  int32_t position() const { return prompt_len() + static_cast<int32_t>(output_tokens.size()) - 1; }
  // The token PRELUDE embeds and its position: the last sampled token, or while self drafting
  // the latest draft (after it in the context).
  int32_t feed_token() const { return spec.drafts.empty() ? output_tokens.back() : spec.drafts.back(); }
  int32_t feed_position() const { return position() + static_cast<int32_t>(spec.drafts.size()); }
  // K/V positions the request needs over its life (the last sampled token is never fed back).
  int32_t capacity_tokens() const { return prompt_len() + params.max_tokens - 1; }
  bool finished() const { return stage == Stage::kFinished; }
};

}  // namespace rlt::sched
