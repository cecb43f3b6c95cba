// rlt's embedded default model: a small Ouro-architecture checkpoint with deterministic random
// weights and a byte-level tokenizer, created on first use with no download. It exercises every
// code path (GQA, four loops, the exit gate) but its text is gibberish: it has never been trained.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "rlt/status.h"

namespace rlt::model {

// Version tag baked into the folder name; bump it when the demo's contents change.
inline constexpr const char* kDemoModelName = "rlt-demo-ouro-v1";

// Writes config.json, generation_config.json, model.safetensors (bf16), tokenizer.json and
// tokenizer_config.json into `dir` (created if needed). The same call always writes the same bytes.
Status write_demo_checkpoint(const std::string& dir);

// A shape that write_random_checkpoint fills with deterministic random bf16 weights, uniform in:
// ±projection (q/k/v/o, gate/up/down), ±embedding, ±head (lm head), 1 ± 0.2 (norms), ±0.15 (exit
// gate, bias -1.5). Ouro: sandwich norms and the exit gate; Nanbeige: a looped Llama (pre-norms,
// no gate); Llama: one loop; Huginn (huginn_raven): prelude and coda blocks around `layers`
// recurrent ones, a q/k bias (±0.5), and the adapter's state columns scaled by `state_scale`
// (below 1 the recurrence contracts towards a fixed point, as a trained model's does, so that
// the exit criteria stop tokens at different steps).
struct RandomCheckpointShape {
  io::Architecture architecture = io::Architecture::kOuro;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0,
          head_dim = 0, loops = 0, max_positions = 0;
  double rope_theta = 1e6, rms_norm_eps = 1e-6;
  int64_t bos_token_id = 0, eos_token_id = 0;
  double projection = 0.1, embedding = 1.0, head = 0.2;
  int64_t prelude_layers = 0, coda_layers = 0;  // Huginn
  double state_scale = 0.2;                     // Huginn
  uint64_t seed = 1;  // the preset's weights (write_random_checkpoint's seed when none is given)
  // Also write the demo's byte-level tokenizer and ChatML template (needs vocab = 3 + 256), so
  // that text prompts, chat and the server work on the checkpoint.
  bool byte_tokenizer = false;
};

// The named shapes, for `rlt make-model`, tests and benchmarks.
struct RandomCheckpointPreset {
  const char* name;
  const char* description;
  RandomCheckpointShape shape;
};
const std::vector<RandomCheckpointPreset>& random_checkpoint_presets();

// A shape by name (random_checkpoint_presets): "demo" (the embedded default model), the released
// models' shapes ("ouro-1.4b", "ouro-2.6b", "nanbeige-4.2-3b": weights scaled to unit-variance
// activations, for speed measurements without a download) and small ones for tests
// ("nanbeige-tiny").
Result<RandomCheckpointShape> random_checkpoint_preset(const std::string& name);

// Writes config.json, generation_config.json and model.safetensors (bf16) for `shape` into `dir`
// (created if needed), the weights drawn from `seed`, and the byte-level tokenizer when the shape
// asks for it. Holds the tensors in memory while writing (2.9 GB for ouro-1.4b, 5.3 GB for
// ouro-2.6b, 8.4 GB for nanbeige-4.2-3b).
Status write_random_checkpoint(const std::string& dir, const RandomCheckpointShape& shape,
                               uint64_t seed);

// rlt's cache folder: $RLT_CACHE_DIR, else $XDG_CACHE_HOME/rlt, else ~/.cache/rlt (not created).
Result<std::string> rlt_cache_dir();

// The folder the demo lives in: the cache folder followed by kDemoModelName. Creates it
// (atomically, via a temporary folder) when missing.
Result<std::string> ensure_demo_checkpoint();

}  // namespace rlt::model
