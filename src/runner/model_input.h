// What a model runner executes for one scheduled batch, as self-contained plain data: the stage,
// the requests whose states the rows read and write, the tokens to embed, and each pass's
// attention metadata and K/V write targets already planned from the KV manager's block tables.
// A runner never sees the scheduler or the KV manager; the engine builds a ModelInput from them
// (engine/model_input_builder.h) and applies the results (BatchResult) in
// Scheduler::update_from_output.
//
//   PREFILL   passes: one (every chunk row through every loop, loop-major) or, under the `shared`
//             layout, one wave per position offset; `tokens` of each pass are embedded first;
//             `keep_state` rows end their prompt and leave their hidden state to the request;
//             `scores` rows get their prompt logprobs.
//   PRELUDE   `tokens`: each request's last sampled token, embedded into its state.
//   RECURRENT one pass: one loop per row at the row's own depth; returns each row's gate logit.
//   CODA      the lm head on each request's state; `sampling` rows for runners that sample on
//             their device; returns logits (or device-sampled tokens).
//
// A model with blocks outside the recurrence (Huginn's prelude and coda, which attend) has
// every stage's rows in a pass, each pass planned for those blocks' outer planes too
// (`outer_attention`, `outer_writes`): PREFILL runs the prelude before the loops and the readout
// after them; PRELUDE runs the prelude on its one pass (`tokens` and `seeds`: each row's token
// and initial-state seed) and starts each row's state; RECURRENT returns each row's exit
// criterion value (`criteria`); CODA reads its pass's rows out.
//   VERIFY    speculative decoding: one pass as PREFILL's (each request's last sampled token and
//             its drafts, embedded, through every loop), then the lm head on every row; returns
//             the logits of every row, which the engine samples and checks against the drafts.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "attention/metadata_planner.h"
#include "kv/kv_types.h"
#include "rlt/config.h"
#include "rlt/sampling_params.h"
#include "rlt/status.h"
#include "sampling/history.h"

namespace rlt::runner {

enum class Stage : uint8_t { kPrefill, kPrelude, kRecurrent, kCoda, kVerify };
std::string_view stage_name(Stage stage);

// Where each row of a pass writes its K/V: the page of the row's depth plane that holds its
// position (one set per planned depth), and the slot in that page.
struct PassWrites {
  std::vector<kv::BlockId> block;  // [passes][rows], flat: depth d, row i at d * rows + i
  std::vector<int32_t> slot;       // [rows]: the slot depends on the position only
};

// A prompt row whose state after the pass's last loop is scored (prompt logprobs): the lm head
// on it, and the raw logprob of `target` (the prompt's next token) with the `top` most likely.
struct ScoreRow {
  int32_t row = 0;
  int32_t target = 0;
  int32_t top = 0;
};

// One model pass over a set of rows: through one loop at each row's own depth (`depths` empty),
// or through every loop of `depths` in order over the same rows.
struct PassInput {
  std::vector<int32_t> tokens;  // PREFILL, VERIFY: the rows' tokens, embedded before the loops
  std::vector<attention::PlannedRow> rows;
  std::vector<int32_t> depths;
  attention::AttentionPlan attention;  // one table set per entry of `depths` (or one)
  PassWrites writes;
  std::vector<int32_t> keep_state;  // PREFILL: rows (indices) that end their request's prompt
  std::vector<ScoreRow> scores;     // PREFILL: rows of requests that asked for prompt logprobs
  // Models with outer blocks: one table set (and write target) per outer plane; the seed of each
  // row's initial state (PREFILL, PRELUDE); each row's exit criterion (RECURRENT).
  attention::AttentionPlan outer_attention;
  PassWrites outer_writes;
  std::vector<uint64_t> seeds;
  std::vector<ExitCriterion> criteria;

  int64_t num_rows() const { return static_cast<int64_t>(rows.size()); }
  size_t num_loops() const { return depths.empty() ? 1 : depths.size(); }
};

// That every K/V write target of `pass` lies in a pool of `num_blocks` blocks of `block_size`
// slots and that the pass's arrays agree in size: runners check it once per pass, before any
// layer writes.
// With `outer_planes`, also the outer planes' write targets and table sets.
Status check_pass_writes(const PassInput& pass, int32_t num_blocks, int32_t block_size, int32_t outer_planes = 0);

// CODA: what a device sampler needs of a row. Both pointers belong to the engine and are valid
// during ModelRunner::submit only; a null `params` marks a request no longer live (its row is
// computed but never read).
struct SamplingRow {
  const SamplingParams* params = nullptr;
  const sampling::TokenHistory* history = nullptr;
  double uniform = 0.0;  // the request's next sampling uniform (RngState::uniform())
  // The structured-output mask (Sampler::sample's `allowed`; empty: unconstrained). Device
  // samplers without a mask step leave such batches to the host sampler.
  std::span<const uint64_t> allowed;
};

struct ModelInput {
  uint64_t seq = 0;  // the scheduler's batch number: results are collected in this order
  Stage stage = Stage::kPrefill;
  std::vector<kv::RequestId> requests;  // one per scheduled item (PREFILL: a prompt chunk)
  std::vector<int32_t> tokens;          // PRELUDE: one per row
  std::vector<SamplingRow> sampling;    // CODA: one per row

  // PREFILL, RECURRENT, VERIFY: the passes, run in order.
  std::span<const PassInput> passes() const { return {pass_pool_.data(), passes_used_}; }
  // A new, empty pass at the end (reusing an earlier batch's buffers).
  PassInput& add_pass();
  // Empties the input for the next batch; every buffer keeps its capacity, so that a steady
  // state of batches allocates nothing.
  void clear();

 private:
  std::vector<PassInput> pass_pool_;
  size_t passes_used_ = 0;
};

}  // namespace rlt::runner
