#include "model/model_capabilities.h"

#include <fmt/format.h>

namespace rlt::model {

const char* feature_name(ModelFeature f) {
  switch (f) {
    case ModelFeature::kLastExitedLayout:
      return "kv-layout last_exited";
    case ModelFeature::kSharedLayout:
      return "kv-layout shared";
    case ModelFeature::kPrefixCaching:
      return "prefix caching";
    case ModelFeature::kAsyncScheduling:
      return "async scheduling";
    case ModelFeature::kAdaptiveExit:
      return "adaptive exit";
    case ModelFeature::kSpeculativeNgram:
      return "speculative ngram";
    case ModelFeature::kSpeculativeSelf:
      return "speculative self";
    case ModelFeature::kGguf:
      return "gguf";
    case ModelFeature::kCuda:
      return "cuda";
  }
  return "?";
}

const ModelCapability& ModelCapabilities::get(ModelFeature f) const {
  return features.at(static_cast<size_t>(f));
}

namespace {

// Huginn (as vllm-rlt, which also refuses the shared layout, prefix caching, async scheduling and
// speculation for it), with the adaptive exit vllm-rlt lacks.
template <typename Add>
void add_huginn_capabilities(Add& add) {
  add(ModelFeature::kLastExitedLayout, true, "the official code's lookup: deeper steps read an early-exited token's last step");
  add(ModelFeature::kSharedLayout, false,
      "later tokens read each earlier token's K/V of the same recurrence step (the official code's lookup); one "
      "plane overwritten by every step computes something else");
  add(ModelFeature::kPrefixCaching, false,
      "every prompt token's recurrence starts from the request's own seeded noise, so two requests' K/V of the "
      "same prompt differ");
  add(ModelFeature::kAsyncScheduling, false, "the exit criteria decide from each step's own readout");
  add(ModelFeature::kAdaptiveExit, true,
      "per request: exit_criterion latent-diff, entropy-diff, kl, minp-kl or argmax-stability (with "
      "exit_criterion_threshold, min/max loops)");
  const char* speculation =
      "verification runs every draft through every step in one pass, while Huginn's tokens stop by per-step criteria";
  add(ModelFeature::kSpeculativeNgram, false, speculation);
  add(ModelFeature::kSpeculativeSelf, false, speculation);
  add(ModelFeature::kGguf, false, "llama.cpp defines no Huginn architecture");
  add(ModelFeature::kCuda, false, "the GPU runner has no prelude or coda stage with attention yet");
}

}  // namespace

ModelCapabilities model_capabilities(const io::ModelConfig& c) {
  ModelCapabilities caps;
  caps.architecture = io::architecture_name(c.architecture);
  auto add = [&](ModelFeature f, bool supported, std::string why = {}) {
    caps.features.push_back({f, supported, std::move(why)});
  };
  const int64_t loops = c.total_ut_steps;
  if (c.recurrent_injection()) {
    add_huginn_capabilities(add);
    return caps;
  }
  add(ModelFeature::kLastExitedLayout, true);
  add(ModelFeature::kSharedLayout, true,
      loops > 1 ? "one K/V plane: a later loop's K/V replaces an earlier one's (other outputs than "
                  "last_exited)"
                : "the same cache as last_exited for a one-loop model");
  add(ModelFeature::kPrefixCaching, true);
  add(ModelFeature::kAsyncScheduling, true, "with --exit-policy ouro_delayed or trace");
  if (c.has_exit_gate()) {
    add(ModelFeature::kAdaptiveExit, true,
        "the exit gate, per request (exit_threshold, min/max loops)");
  } else if (c.architecture == io::Architecture::kOuro) {
    add(ModelFeature::kAdaptiveExit, false,
        "the file has no exit gate (llama.cpp's converter drops it): every token runs all loops");
  } else {
    add(ModelFeature::kAdaptiveExit, false,
        loops > 1 ? fmt::format("{} has no exit gate: every token runs all {} loops (or max_loops)",
                                caps.architecture, loops)
                  : "one loop: nothing to exit early from");
  }
  add(ModelFeature::kSpeculativeNgram, true);
  add(ModelFeature::kSpeculativeSelf, loops > 1,
      loops > 1 ? "" : "self drafts run fewer loops than the model, which runs one");
  add(ModelFeature::kGguf, true,
      c.architecture == io::Architecture::kOuro
          ? "rlt's own ouro GGUF keeps the exit gate; llama.cpp's converter drops it"
          : fmt::format("llama.cpp's {} architecture", caps.architecture));
  add(ModelFeature::kCuda, true);
  return caps;
}

Status check_model_capabilities(const ModelCapabilities& caps, const EngineConfig& config) {
  auto refuse = [&](ModelFeature f, const std::string& setting,
                    const std::string& change) -> Status {
    const ModelCapability& cap = caps.get(f);
    if (cap.supported) return {};
    return unimplemented(fmt::format("{}: this {} model does not support {} ({}); {}", setting,
                                     caps.architecture, feature_name(f), cap.why, change));
  };
  RLT_RETURN_IF_ERROR(
      config.kv_layout == KVLayout::kShared
          ? refuse(ModelFeature::kSharedLayout, "--kv-layout shared", "use --kv-layout last_exited")
          : refuse(ModelFeature::kLastExitedLayout, "--kv-layout last_exited",
                   "use --kv-layout shared"));
  if (config.enable_prefix_caching)
    RLT_RETURN_IF_ERROR(refuse(ModelFeature::kPrefixCaching, "--enable-prefix-caching", "drop it"));
  if (config.async_scheduling)
    RLT_RETURN_IF_ERROR(refuse(ModelFeature::kAsyncScheduling, "--async-scheduling", "drop it"));
  if (config.speculative.method == SpeculativeMethod::kNgram)
    RLT_RETURN_IF_ERROR(
        refuse(ModelFeature::kSpeculativeNgram, "--speculative-method ngram", "drop it"));
  if (config.speculative.method == SpeculativeMethod::kSelf)
    RLT_RETURN_IF_ERROR(refuse(ModelFeature::kSpeculativeSelf, "--speculative-method self",
                               caps.supports(ModelFeature::kSpeculativeNgram)
                                   ? "use --speculative-method ngram"
                                   : "drop it"));
  if (config.device != "cpu")
    RLT_RETURN_IF_ERROR(refuse(ModelFeature::kCuda, "--device " + config.device, "use --device cpu"));
  return {};
}

}  // namespace rlt::model
