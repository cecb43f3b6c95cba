// The dense single-request reference model: the oracle every batched executor is checked
// against. One growing K/V history per (loop, layer), full-depth prefill, incremental decode with
// the `ouro` exit rule and `last_exited` semantics, greedy sampling. Simple on purpose; not fast.
// Huginn: the prelude's and the coda's K/V are one history per block (independent of the loop),
// every token's recurrence starts from its seeded initial state (initial_state.h), and decode
// exits by the exit criterion of ExitParams (exit_criteria.h), reading the coda out at every
// step when the criterion needs logits (the coda's K/V of a position are those of its exit step).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/exit_rule.h"
#include "model/ouro_core.h"
#include "rlt/status.h"

namespace rlt::model {

// What one token went through, loop by loop (filled when tracing is asked for).
struct LoopTrace {
  std::vector<std::vector<float>> hidden;       // [loops run][rows·hidden], after each loop's norm
  std::vector<std::vector<float>> gate_logits;  // [loops run][rows]
  std::vector<double> criterion_values;         // decode, Huginn's criteria: [loops run]
};

struct StepResult {
  std::vector<float> logits;  // [vocab], from the exit loop's hidden state
  std::vector<float> row_logits;  // prefill with every_row_logits: [rows, vocab] (perplexity)
  int64_t exit_depth = 0;     // 1-based loops run
  double exit_probability = 0.0;  // 1 - Π(1-λ) at the exit (decode only)
  LoopTrace trace;            // every row of the step (all prompt rows for prefill)
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::vector<int64_t> exit_depths;  // per generated token; the first is always the full depth
  std::string finish_reason;         // "stop" (an eos id was sampled) or "length"
  std::vector<StepResult> steps;     // with tracing: the prefill, then one per decode step
};

// How a token's K/V at one loop relate to other loops' (see docs/kv-cache.md).
enum class KvSemantics {
  kLastExited,  // one history per (loop, layer); an early exit donates its K/V to deeper loops
  kShared,      // one history per layer, overwritten by every loop: later tokens see the last
                // loop each earlier token ran; prefill runs all loops of a position first
};

class ReferenceModel {
 public:
  // `noise_seed`: the seed of Huginn's initial states (initial_state.h); unused otherwise.
  explicit ReferenceModel(std::shared_ptr<const OuroModel> model,
                          KvSemantics semantics = KvSemantics::kLastExited, uint64_t noise_seed = 0);

  // Appends prompt tokens at full depth (all loops, loop-major). May be called repeatedly to
  // prefill in chunks. Returns the logits of the chunk's last position.
  // With every_row_logits, also the logits of every position (StepResult::row_logits).
  Result<StepResult> prefill(std::span<const int32_t> tokens, bool trace = false, bool every_row_logits = false);

  // Feeds one generated token at the next position, running loops until the exit rule fires.
  // Under last_exited, a token exiting after loop e provides its loop-e K/V to deeper loops.
  Result<StepResult> decode(int32_t token, const ExitParams& resolved, bool trace = false);

  // Greedy generation: prefill, then up to max_tokens tokens, stopping after an eos id unless
  // ignore_eos.
  Result<GenerateResult> generate(std::span<const int32_t> prompt, int64_t max_tokens,
                                  const ExitParams& params, bool ignore_eos = false,
                                  bool trace = false);

  int64_t length() const { return length_; }
  void reset();

 private:
  class DenseKv;
  Status check_tokens(std::span<const int32_t> tokens) const;
  // Huginn: embeds and runs the prelude (its output in `injection`); fills `state` with the
  // rows' initial states.
  void start_recurrence(std::span<const int32_t> tokens, const int64_t* positions,
                        std::vector<float>& injection, std::vector<float>& state);

  std::shared_ptr<const OuroModel> model_;
  OuroCore core_;
  CoreScratch scratch_;
  std::shared_ptr<DenseKv> kv_;
  KvSemantics semantics_;
  uint64_t noise_seed_;
  int64_t length_ = 0;
};

}  // namespace rlt::model
