// Flags shared by every command that runs the engine (generate, bench, serve): the engine
// configuration and a request's sampling parameters. Defaults come from EngineConfig and
// SamplingParams (one source of truth); see docs/scheduling.md and docs/sampling.md.
#pragma once

#include <string>

#include "cli/attention_flags.h"
#include "rlt/engine.h"
#include "rlt/sampling_params.h"

namespace CLI {
class App;
}

namespace rlt::cli {

struct EngineFlags {
  EngineConfig config;
  AttentionFlags attention;
  double kv_cache_gib = 0.0;  // 0: the engine's default (1 GiB on the CPU, sized on a GPU)
  double preemption_host_gib = 4.0;
  bool no_incremental_kv = false;
  bool no_cuda_graphs = false;
  bool host_sampling = false;
  bool no_adaptive_threads = false;
  bool no_adaptive_speculation = false;
  std::string pack_weights = "deferred";  // or "at-load"

  // The final configuration for `model_dir`.
  EngineConfig resolve(const std::string& model_dir) const;
};

// Sampling flags; optional fields use sentinels because the CLI parser has no optionals.
struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;  // -1: derive from the engine seed
  int logprobs = -1;  // -1: none
  SamplingParams resolve() const;
};

void add_engine_flags(CLI::App& cmd, EngineFlags& flags);
// An option whose value is one of an enum's names (rlt/config.h): parsed once, here; a wrong
// name is a usage error listing the accepted ones. Shows the current value as the default.
template <typename E>
void add_enum_option(CLI::App& cmd, const std::string& flag, E& value,
                     Result<E> (*parse)(std::string_view), const std::string& description);
void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags);

// The help of --dtype, --quantize and --activation-dtype, shared by every command that loads
// weights.
inline constexpr const char* kWeightDTypeHelp =
    "GGUF files: auto (the CPU computes on Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K as "
    "stored; other quantized types, and GPU runs, dequantize to bf16), or bf16 / f32 / f16 (every "
    "quantized weight dequantized into it at load)";
inline constexpr const char* kQuantizeHelp =
    "Safetensors checkpoints: quantize the linear layers at load (none, q8_0, q4_k, q6_k; the "
    "embedding, norms and exit gate stay as stored; CPU runs)";
inline constexpr const char* kActivationDTypeHelp =
    "Linear-layer activations: f32, bf16 (bf16 weights on AVX512_BF16 CPUs: ~2x prefill), or "
    "int8 (quantized weights on AVX2 or AArch64 CPUs: 8-bit activations per 32 columns, integer "
    "dot products, as llama.cpp)";

}  // namespace rlt::cli
