// Hugging Face config.json and generation_config.json for the models rlt runs.
// Parsing is strict: a value rlt would compute differently from the reference is refused with
// the field name and the accepted values, never silently ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlt/status.h"

namespace rlt::io {

// Which forward the checkpoint needs. Plain Llama is the one-loop case of the same core: pre-norm
// layers (no sandwich norms), one final norm, no exit gate, total_ut_steps = 1. Nanbeige is a
// looped Llama: the whole pre-norm stack runs num_loops times with model.norm after every loop,
// no exit gate (every token runs every loop). Huginn (huginn_raven) runs prelude blocks, then a
// recurrent block of num_layers blocks total_ut_steps times on a state that starts as noise and
// takes the prelude's output at every step, then coda blocks (docs/models.md).
enum class Architecture { kOuro, kLlama, kNanbeige, kHuginn };

// The architecture's name as config.json's model_type and GGUF's general.architecture spell it.
const char* architecture_name(Architecture a);

// Hugging Face `rope_scaling`: how the rotary inverse frequencies are adjusted.
struct RopeScaling {
  // kFrequencyFactors: one divisor per frequency, as GGUF files store llama3-style scaling
  // (the `rope_freqs.weight` tensor llama.cpp's converter precomputes).
  enum class Kind { kNone, kLinear, kLlama3, kFrequencyFactors };
  Kind kind = Kind::kNone;
  std::vector<float> frequency_factors;            // kFrequencyFactors: head_dim / 2 divisors
  double factor = 1.0;
  double low_freq_factor = 1.0;                    // llama3
  double high_freq_factor = 4.0;                   // llama3
  int64_t original_max_position_embeddings = 0;    // llama3
};

struct ModelConfig {
  std::string model_type;  // "ouro", "llama", "nanbeige" or "huginn_raven"
  Architecture architecture = Architecture::kOuro;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;    // L, physical layers of the shared core
  int64_t num_heads = 0;     // query heads
  int64_t num_kv_heads = 0;  // K/V heads (GQA when < num_heads)
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  int64_t total_ut_steps = 1;  // T, loops of the core per token
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double early_exit_threshold = 1.0;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype;  // informational: the dtype the checkpoint was saved in
  bool tie_word_embeddings = false;  // lm head = embed_tokens (no lm_head.weight tensor)
  // Ouro: the checkpoint holds the exit gate. llama.cpp's GGUF converter drops it; without it
  // every token runs all total_ut_steps loops.
  bool exit_gate = true;
  RopeScaling rope_scaling;
  // Huginn: the blocks before and after the recurrence (once per token; num_layers counts the
  // recurrent block's), the embedding's scale, and the std of the initial state's truncated
  // normal (cut at ±3 std).
  int64_t prelude_layers = 0;
  int64_t coda_layers = 0;
  double embedding_scale = 1.0;
  double initial_state_std = 0.0;

  // Ouro: four norms per layer (sandwich) and an exit gate; Llama: two pre-norms, no gate.
  bool has_exit_gate() const { return architecture == Architecture::kOuro && exit_gate; }
  bool sandwich_norms() const { return architecture == Architecture::kOuro; }
  // Huginn: each block's four norms act on the residual sums, q and k have a bias, and the core
  // reads the prelude's output through the adapter.
  bool recurrent_injection() const { return architecture == Architecture::kHuginn; }
  // Blocks outside the recurrence (Huginn's prelude and coda).
  int64_t outer_layers() const { return prelude_layers + coda_layers; }

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t params_per_layer() const;
  int64_t parameter_count() const;
  // K and V values one token keeps for one loop depth across all layers.
  int64_t kv_values_per_token_per_depth() const { return 2 * num_layers * kv_dim(); }
};

// Refuses sizes no real model has (a corrupt or hostile file): every count rlt sizes loops and
// tables by is bounded, so nothing downstream allocates on a lie. `source` names the file.
Status check_config_limits(const ModelConfig& config, const std::string& source);

// `source` names the file in error messages.
Result<ModelConfig> parse_model_config(std::string_view json_text, const std::string& source);
Result<ModelConfig> load_model_config(const std::string& path);

struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;
};

Result<GenerationConfig> parse_generation_config(std::string_view json_text, const std::string& source);
// A missing file is not an error (returns an empty config): many checkpoints omit it.
Result<GenerationConfig> load_generation_config(const std::string& path);

Result<std::string> read_text_file(const std::string& path);

}  // namespace rlt::io
