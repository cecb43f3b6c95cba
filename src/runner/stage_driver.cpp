#include "runner/stage_driver.h"

#include <fmt/format.h>

namespace rlt::runner {

Status run_stages(const ModelInput& input, StageExecutor& x) {
  switch (input.stage) {
    case Stage::kPrefill:
      // One pass (loop-major), or one wave per position offset under the `shared` layout.
      for (const PassInput& pass : input.passes()) {
        RLT_RETURN_IF_ERROR(x.embed_pass(pass));
        RLT_RETURN_IF_ERROR(x.bind_pass(pass));
        RLT_RETURN_IF_ERROR(x.pass_prelude(pass));
        for (size_t d = 0; d < pass.num_loops(); ++d) RLT_RETURN_IF_ERROR(x.pass_loop(pass, d));
        RLT_RETURN_IF_ERROR(x.keep_states(pass));
        RLT_RETURN_IF_ERROR(x.pass_readout(pass));
        if (!pass.scores.empty()) RLT_RETURN_IF_ERROR(x.score_rows(pass));
      }
      return {};
    case Stage::kPrelude:
      if (input.tokens.size() != input.requests.size()) {
        return internal_error(fmt::format("a prelude batch of {} requests has {} tokens",
                                          input.requests.size(), input.tokens.size()));
      }
      if (input.passes().size() == 1) return x.prelude_pass(input.passes()[0]);
      return x.prelude(input.requests, input.tokens);
    case Stage::kRecurrent:
      if (input.passes().size() != 1) {
        return internal_error(
            fmt::format("a recurrent batch has {} passes (one expected)", input.passes().size()));
      }
      return x.recurrent(input.passes()[0]);
    case Stage::kCoda:
      return x.coda(input);
    case Stage::kVerify: {
      if (input.passes().size() != 1) {
        return internal_error(fmt::format("a verify batch has {} passes (one expected)", input.passes().size()));
      }
      const PassInput& pass = input.passes()[0];
      RLT_RETURN_IF_ERROR(x.embed_pass(pass));
      RLT_RETURN_IF_ERROR(x.bind_pass(pass));
      RLT_RETURN_IF_ERROR(x.pass_prelude(pass));
      for (size_t d = 0; d < pass.num_loops(); ++d) RLT_RETURN_IF_ERROR(x.pass_loop(pass, d));
      RLT_RETURN_IF_ERROR(x.pass_readout(pass));
      return x.pass_logits(pass);
    }
  }
  return internal_error(fmt::format("cannot execute a {} batch", stage_name(input.stage)));
}

}  // namespace rlt::runner
