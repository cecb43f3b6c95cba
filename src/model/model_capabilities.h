// What a model architecture supports, declared as data (as attention backends declare their
// capabilities): the engine checks a configuration against it and refuses, with the reason and
// what to change, a combination the model cannot compute; `rlt info` lists it.
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "rlt/config.h"
#include "rlt/status.h"

namespace rlt::model {

enum class ModelFeature {
  kLastExitedLayout,  // --kv-layout last_exited
  kSharedLayout,      // --kv-layout shared
  kPrefixCaching,     // --enable-prefix-caching
  kAsyncScheduling,   // --async-scheduling
  kAdaptiveExit,      // exit thresholds below 1 stop a token early
  kSpeculativeNgram,  // --speculative-method ngram
  kSpeculativeSelf,   // --speculative-method self
  kGguf,              // loads from (and `rlt convert` writes) a GGUF file
  kCuda,              // --device cuda
};

// "kv-layout last_exited", "adaptive exit", ... (for listings and messages).
const char* feature_name(ModelFeature f);

struct ModelCapability {
  ModelFeature feature;
  bool supported = true;
  std::string why;  // why not (or a caveat when supported); empty when there is nothing to add
};

struct ModelCapabilities {
  std::string architecture;               // io::architecture_name
  std::vector<ModelCapability> features;  // every ModelFeature, in enum order

  const ModelCapability& get(ModelFeature f) const;
  bool supports(ModelFeature f) const { return get(f).supported; }
};

ModelCapabilities model_capabilities(const io::ModelConfig& config);

// The engine-wide settings of `config` that need a feature the model lacks, refused with the
// reason and what to change. Per request, a model without adaptive exit ignores exit thresholds
// (every token runs to its max_loops): clients send them to any model. A request's speculation is
// the scheduler's to check (refused with the reason when the request asks for it, plain decoding
// when it comes from the engine's default).
Status check_model_capabilities(const ModelCapabilities& caps, const EngineConfig& config);

}  // namespace rlt::model
