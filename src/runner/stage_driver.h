// One batch's stages written once, for every device: what PREFILL, PRELUDE, RECURRENT and CODA do
// with a ModelInput's passes and rows, over the small set of steps a device's runner implements
// (StageExecutor). The math of one loop is model/loop_program.h; this is the order of loops,
// passes and state moves around it.
//
//   PREFILL   per pass: embed its tokens, bind its attention metadata, run the prelude blocks
//             (Huginn), each planned loop (loop-major: every row through loop 0, then loop 1,
//             ...), keep the states of the rows that end a prompt, read every row out (Huginn's
//             coda), score the rows that ask for prompt logprobs
//   PRELUDE   embed each request's last sampled token into its state (Huginn: its pass through
//             the prelude blocks, and each row's initial state)
//   RECURRENT one loop per row at its own depth, with the gate logits (or criterion values)
//   CODA      the lm head on each request's state (and device sampling where the runner does it)
//   VERIFY    PREFILL's pass, then the lm head on every row (the logits come back)
#pragma once

#include <cstddef>
#include <span>

#include "kv/kv_types.h"
#include "rlt/status.h"
#include "runner/model_input.h"

namespace rlt::runner {

class StageExecutor {
 public:
  virtual ~StageExecutor() = default;
  // The pass's rows' hidden states = the embeddings of its tokens.
  virtual Status embed_pass(const PassInput& pass) = 0;
  // The pass's attention metadata for the loops that follow (checked once).
  virtual Status bind_pass(const PassInput& pass) = 0;
  // One loop of the core over the pass's rows, reading and writing planned depth `depth_index`.
  virtual Status pass_loop(const PassInput& pass, size_t depth_index) = 0;
  // The blocks before the recurrence over the pass's rows (after bind_pass): their output is the
  // injection the loops read, and each row's state becomes its initial state. Only models with
  // such blocks (Huginn) do anything.
  virtual Status pass_prelude(const PassInput&) { return {}; }
  // After the last loop: the rows become the lm head's input (Huginn's readout, whose coda
  // writes its K/V); nothing for models whose loop norm ends the core.
  virtual Status pass_readout(const PassInput&) { return {}; }
  // The hidden rows pass.keep_state names become their requests' states.
  virtual Status keep_states(const PassInput& pass) = 0;
  // The prompt logprobs of the rows pass.scores names (after the pass's last loop).
  virtual Status score_rows(const PassInput& pass) = 0;
  // The lm head on every row of the pass (after its last loop): the batch's logits.
  virtual Status pass_logits(const PassInput& pass) = 0;
  virtual Status prelude(std::span<const kv::RequestId> requests,
                         std::span<const int32_t> tokens) = 0;
  // PRELUDE for a model whose prelude attends: its one pass (tokens, positions, seeds).
  virtual Status prelude_pass(const PassInput&) {
    return unimplemented("this runner has no attending prelude (Huginn runs on the CPU)");
  }
  virtual Status recurrent(const PassInput& pass) = 0;
  virtual Status coda(const ModelInput& input) = 0;
};

// Runs `input`'s stage on `executor`; stops at the first error.
Status run_stages(const ModelInput& input, StageExecutor& executor);

}  // namespace rlt::runner
