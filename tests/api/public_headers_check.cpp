// The public API compiles on its own: this translation unit sees include/ only (no src/), so a
// public header that reaches into the implementation fails the build.
#include "rlt/engine.h"
#include "rlt/sampling_params.h"
#include "rlt/status.h"

namespace {

// Uses each header's main types, so that they are complete here.
[[maybe_unused]] rlt::Status touch(rlt::EngineConfig& config, rlt::RequestResult& result,
                                   const rlt::RequestOutput& output) {
  config.model = "m";
  result.append(output);
  rlt::SamplingParams params;
  return params.validate(2);
}

}  // namespace
