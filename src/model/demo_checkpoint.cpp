#include "model/demo_checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/half.h"
#include "io/safetensors_writer.h"

namespace rlt::model {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

// Three chat specials + one token per byte; GQA 2:1 so the demo exercises head grouping.
constexpr RandomCheckpointShape kDemoShape{.vocab = 3 + 256,
                                           .hidden = 256,
                                           .intermediate = 688,
                                           .layers = 4,
                                           .heads = 8,
                                           .kv_heads = 4,
                                           .head_dim = 32,
                                           .loops = 4,
                                           .max_positions = 4096,
                                           .seed = 20261129,
                                           .byte_tokenizer = true};

const char* const kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

// splitmix64: a tiny, portable generator. Weights come from uniform draws (no libm calls), so
// the demo's bytes are identical on every machine.
class DemoRng {
 public:
  explicit DemoRng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform on [-1, 1).
  double symmetric() { return static_cast<double>(next() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  uint64_t state_;
};

io::TensorToWrite bf16_tensor(const std::string& name, std::vector<int64_t> shape, DemoRng& rng,
                              double center, double half_width) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  io::TensorToWrite t{name, DType::kBF16, std::move(shape), std::vector<uint8_t>(static_cast<size_t>(2 * n))};
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v = f32_to_bf16(static_cast<float>(center + half_width * rng.symmetric()));
    t.bytes[2 * i] = static_cast<uint8_t>(v);
    t.bytes[2 * i + 1] = static_cast<uint8_t>(v >> 8);
  }
  return t;
}

// config.json of a Nanbeige4.2 checkpoint (the released file's fields) or a Llama one.
ordered_json llama_family_config(const RandomCheckpointShape& s) {
  const bool nanbeige = s.architecture == io::Architecture::kNanbeige;
  ordered_json c;
  c["architectures"] = {nanbeige ? "NanbeigeForCausalLM" : "LlamaForCausalLM"};
  c["model_type"] = io::architecture_name(s.architecture);
  c["vocab_size"] = s.vocab;
  c["hidden_size"] = s.hidden;
  c["intermediate_size"] = s.intermediate;
  c["num_hidden_layers"] = s.layers;
  c["num_attention_heads"] = s.heads;
  c["num_key_value_heads"] = s.kv_heads;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = s.max_positions;
  c["rope_theta"] = s.rope_theta;
  c["rope_scaling"] = nullptr;
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["rms_norm_eps"] = s.rms_norm_eps;
  if (nanbeige) {
    c["num_loops"] = s.loops;
    c["skip_loop_final_norm"] = false;
  }
  c["pretraining_tp"] = 1;
  c["tie_word_embeddings"] = false;
  c["bos_token_id"] = s.bos_token_id;
  c["eos_token_id"] = s.eos_token_id;
  c["pad_token_id"] = 0;
  c["torch_dtype"] = "bfloat16";
  c["use_cache"] = true;
  return c;
}

// config.json of a Huginn-0125 checkpoint (RavenConfig's fields as released).
ordered_json huginn_config(const RandomCheckpointShape& s) {
  const double std = std::sqrt(2.0 / (5.0 * static_cast<double>(s.hidden)));
  ordered_json c;
  c["architectures"] = {"RavenForCausalLM"};
  c["model_type"] = "huginn_raven";
  c["n_embd"] = s.hidden;
  c["num_attention_heads"] = s.heads;  // the released file's name for RavenConfig's n_heads
  c["num_key_value_heads"] = s.heads;
  c["n_layers"] = s.prelude_layers + s.layers + s.coda_layers;
  c["n_layers_in_prelude"] = s.prelude_layers;
  c["n_layers_in_recurrent_block"] = s.layers;
  c["n_layers_in_coda"] = s.coda_layers;
  c["intermediate_size"] = s.intermediate;
  c["vocab_size"] = s.vocab;
  c["padded_vocab_size"] = s.vocab;
  c["block_size"] = s.max_positions;
  c["rope_base"] = s.rope_theta;
  c["norm_eps"] = s.rms_norm_eps;
  c["mean_recurrence"] = s.loops;
  c["init_values"] = {{"embed_scale", std::sqrt(static_cast<double>(s.hidden))}, {"embedding", std}, {"std", std}};
  c["architecture_class_name"] = "RecurrentGPT";
  c["block_class_name"] = "SandwichBlock";
  c["norm_class_name"] = "RMSNorm_llama";
  c["mlp_class_name"] = "GatedMLP";
  c["nonlin_name"] = "SiLU";
  c["injection_type"] = "linear";
  c["state_init"] = "like-init";
  c["qk_bias"] = true;
  c["bias"] = false;
  c["tie_embeddings"] = true;
  c["test_time_noise"] = 0;
  c["bos_token_id"] = s.bos_token_id;
  c["eos_token_id"] = s.eos_token_id;
  c["pad_token_id"] = 0;
  c["torch_dtype"] = "bfloat16";
  return c;
}

// Huginn's tensors (raven_modeling_minimal's names): the embedding (scaled by sqrt(hidden) in the
// forward, so drawn ±sqrt(3 / hidden) for unit-variance rows), blocks, adapter and ln_f.
std::vector<io::TensorToWrite> huginn_tensors(const RandomCheckpointShape& s, DemoRng& rng) {
  const double p = s.projection;
  std::vector<io::TensorToWrite> out;
  out.push_back(bf16_tensor("transformer.wte.weight", {s.vocab, s.hidden}, rng, 0.0,
                            std::sqrt(3.0 / static_cast<double>(s.hidden))));
  std::vector<std::string> blocks;
  for (int64_t i = 0; i < s.prelude_layers; ++i) blocks.push_back(fmt::format("transformer.prelude.{}.", i));
  for (int64_t i = 0; i < s.layers; ++i) blocks.push_back(fmt::format("transformer.core_block.{}.", i));
  for (int64_t i = 0; i < s.coda_layers; ++i) blocks.push_back(fmt::format("transformer.coda.{}.", i));
  for (const std::string& b : blocks) {
    for (int k = 1; k <= 4; ++k) out.push_back(bf16_tensor(fmt::format("{}norm_{}.weight", b, k), {s.hidden}, rng, 1.0, 0.2));
    out.push_back(bf16_tensor(b + "attn.Wqkv.weight", {3 * s.hidden, s.hidden}, rng, 0, p));
    out.push_back(bf16_tensor(b + "attn.qk_bias", {2, 1, s.heads, s.head_dim}, rng, 0, 0.5));
    out.push_back(bf16_tensor(b + "attn.proj.weight", {s.hidden, s.hidden}, rng, 0, p));
    out.push_back(bf16_tensor(b + "mlp.fc.weight", {2 * s.intermediate, s.hidden}, rng, 0, p));
    out.push_back(bf16_tensor(b + "mlp.proj.weight", {s.hidden, s.intermediate}, rng, 0, p));
  }
  // [hidden, 2·hidden] over concat[state, input]: each row's state half scaled down.
  io::TensorToWrite adapter = bf16_tensor("transformer.adapter.weight", {s.hidden, 2 * s.hidden}, rng, 0, p);
  for (int64_t r = 0; r < s.hidden; ++r) {
    for (int64_t col = 0; col < s.hidden; ++col) {
      const size_t at = static_cast<size_t>(2 * (r * 2 * s.hidden + col));
      const uint16_t bits = static_cast<uint16_t>(adapter.bytes[at] | (adapter.bytes[at + 1] << 8));
      const uint16_t scaled = f32_to_bf16(bf16_to_f32(bits) * static_cast<float>(s.state_scale));
      adapter.bytes[at] = static_cast<uint8_t>(scaled);
      adapter.bytes[at + 1] = static_cast<uint8_t>(scaled >> 8);
    }
  }
  out.push_back(std::move(adapter));
  out.push_back(bf16_tensor("transformer.ln_f.weight", {s.hidden}, rng, 1.0, 0.2));
  return out;
}

ordered_json demo_config(const RandomCheckpointShape& s) {
  if (s.architecture == io::Architecture::kHuginn) return huginn_config(s);
  if (s.architecture != io::Architecture::kOuro) return llama_family_config(s);
  ordered_json c;
  c["architectures"] = {"OuroForCausalLM"};
  c["attention_dropout"] = 0.0;
  c["bos_token_id"] = s.bos_token_id;
  c["eos_token_id"] = s.eos_token_id;
  c["pad_token_id"] = 0;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["hidden_size"] = s.hidden;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = s.intermediate;
  c["layer_types"] = std::vector<std::string>(static_cast<size_t>(s.layers), "full_attention");
  c["max_position_embeddings"] = s.max_positions;
  c["max_window_layers"] = s.layers;
  c["model_type"] = "ouro";
  c["num_attention_heads"] = s.heads;
  c["num_hidden_layers"] = s.layers;
  c["num_key_value_heads"] = s.kv_heads;
  c["rms_norm_eps"] = s.rms_norm_eps;
  c["rope_scaling"] = nullptr;
  c["rope_theta"] = s.rope_theta;
  c["sliding_window"] = nullptr;
  c["tie_word_embeddings"] = false;
  c["torch_dtype"] = "bfloat16";
  c["total_ut_steps"] = s.loops;
  c["early_exit_threshold"] = 1.0;
  c["use_cache"] = true;
  c["use_sliding_window"] = false;
  c["vocab_size"] = s.vocab;
  return c;
}

// GPT-2's byte-to-unicode table: printable bytes map to themselves, the rest to U+0100 onwards.
std::vector<std::string> byte_level_alphabet() {
  std::vector<int> codepoint(256, -1);
  for (int b = 0; b < 256; ++b)
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) codepoint[b] = b;
  int next = 256;
  for (int b = 0; b < 256; ++b)
    if (codepoint[b] < 0) codepoint[b] = next++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int cp = codepoint[b];
    if (cp < 0x80) {
      out[b] = std::string(1, static_cast<char>(cp));
    } else {  // all code points here are below U+0800: two UTF-8 bytes
      out[b] = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
  return out;
}

ordered_json demo_tokenizer() {
  ordered_json added = ordered_json::array();
  ordered_json vocab = ordered_json::object();
  int id = 0;
  for (const char* special : kSpecialTokens) {
    added.push_back({{"id", id}, {"content", special}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    vocab[special] = id++;
  }
  for (const std::string& symbol : byte_level_alphabet()) vocab[symbol] = id++;
  ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                             {"trim_offsets", true}, {"use_regex", true}};
  ordered_json t;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level}}};
  t["post_processor"] = nullptr;
  t["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
                {"vocab", vocab}, {"merges", ordered_json::array()}};
  return t;
}

ordered_json demo_tokenizer_config() {
  ordered_json c;
  c["add_prefix_space"] = false;
  c["bos_token"] = "<|endoftext|>";
  c["eos_token"] = "<|endoftext|>";
  c["unk_token"] = "<|endoftext|>";
  c["clean_up_tokenization_spaces"] = false;
  c["model_max_length"] = kDemoShape.max_positions;
  c["tokenizer_class"] = "GPT2Tokenizer";
  // ChatML, as Ouro's own template: a default system turn when none is given.
  c["chat_template"] =
      "{%- if messages[0]['role'] == 'system' -%}"
      "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
      "{%- else -%}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif -%}"
      "{%- for message in messages -%}"
      "{%- if message.role == 'system' and loop.first -%}{%- else -%}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
      "{%- endif -%}{%- endfor -%}"
      "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' }}{%- endif -%}";
  return c;
}

Status write_json(const fs::path& path, const ordered_json& j) {
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return io_error(fmt::format("failed writing '{}'", path.string()));
  return {};
}

}  // namespace

namespace {

// Uniform in ±sqrt(3 / fan_in) has variance 1 / fan_in: unit-variance outputs.
RandomCheckpointShape unit_variance(RandomCheckpointShape s) {
  s.projection = s.head = std::sqrt(3.0 / static_cast<double>(s.hidden));
  return s;
}

RandomCheckpointShape ouro_released(int64_t layers) {
  return unit_variance({.vocab = 49152,
                        .hidden = 2048,
                        .intermediate = 5632,
                        .layers = layers,
                        .heads = 16,
                        .kv_heads = 16,
                        .head_dim = 128,
                        .loops = 4,
                        .max_positions = 65536});
}

}  // namespace

const std::vector<RandomCheckpointPreset>& random_checkpoint_presets() {
  static const std::vector<RandomCheckpointPreset> kPresets = {
      {"demo", "the embedded default model (Ouro, 4 loops, byte-level tokenizer)", kDemoShape},
      {"ouro-1.4b", "Ouro-1.4B's shape: 24 layers x 4 loops, hidden 2048", ouro_released(24)},
      {"ouro-2.6b", "Ouro-2.6B's shape: 48 layers x 4 loops, hidden 2048", ouro_released(48)},
      // Query heads wider than the hidden size (6 x 48 = 288 > 192), as Nanbeige4.2's 48 x 128 >
      // 3072; the demo's vocabulary, so its tokenizer applies.
      {"nanbeige-tiny", "a small Nanbeige (3 layers x 2 loops, GQA 6:2, byte-level tokenizer)",
       {.architecture = io::Architecture::kNanbeige,
        .vocab = kDemoShape.vocab,
        .hidden = 192,
        .intermediate = 512,
        .layers = 3,
        .heads = 6,
        .kv_heads = 2,
        .head_dim = 48,
        .loops = 2,
        .max_positions = 4096,
        .rope_theta = 7e7,
        .rms_norm_eps = 1e-5,
        .eos_token_id = 2,
        .seed = 20261205,
        .byte_tokenizer = true}},
      {"nanbeige-4.2-3b", "Nanbeige4.2-3B's shape: 22 layers x 2 loops, hidden 3072, GQA 48:8",
       unit_variance({.architecture = io::Architecture::kNanbeige,
                      .vocab = 166144,
                      .hidden = 3072,
                      .intermediate = 10752,
                      .layers = 22,
                      .heads = 48,
                      .kv_heads = 8,
                      .head_dim = 128,
                      .loops = 2,
                      .max_positions = 262144,
                      .rope_theta = 7e7,
                      .rms_norm_eps = 1e-5,
                      .bos_token_id = 166100,
                      .eos_token_id = 166101})},
      {"huginn-tiny", "a small Huginn (1 prelude, 2 recurrent x 8 steps, 1 coda block; byte-level tokenizer)",
       unit_variance({.architecture = io::Architecture::kHuginn,
                      .vocab = kDemoShape.vocab,
                      .hidden = 64,
                      .intermediate = 128,
                      .layers = 2,
                      .heads = 4,
                      .kv_heads = 4,
                      .head_dim = 16,
                      .loops = 8,
                      .max_positions = 4096,
                      .rope_theta = 5e4,
                      .eos_token_id = 2,
                      .prelude_layers = 1,
                      .coda_layers = 1,
                      .seed = 20261206,
                      .byte_tokenizer = true})},
      {"huginn-0125", "Huginn-0125's shape: 2 prelude, 4 recurrent x 32 steps, 2 coda blocks, hidden 5280",
       unit_variance({.architecture = io::Architecture::kHuginn,
                      .vocab = 65536,
                      .hidden = 5280,
                      .intermediate = 17920,
                      .layers = 4,
                      .heads = 55,
                      .kv_heads = 55,
                      .head_dim = 96,
                      .loops = 32,
                      .max_positions = 4096,
                      .rope_theta = 5e4,
                      .bos_token_id = 65504,
                      .eos_token_id = 65505,
                      .prelude_layers = 2,
                      .coda_layers = 2})},
  };
  return kPresets;
}

Result<RandomCheckpointShape> random_checkpoint_preset(const std::string& name) {
  std::string names;
  for (const RandomCheckpointPreset& p : random_checkpoint_presets()) {
    if (name == p.name) return p.shape;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  return invalid_argument(fmt::format("unknown checkpoint preset '{}': expected one of {}", name, names));
}

Status write_random_checkpoint(const std::string& dir_str, const RandomCheckpointShape& s,
                               uint64_t seed) {
  const fs::path dir(dir_str);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(fmt::format("cannot create '{}': {}", dir_str, ec.message()));
  DemoRng rng(seed);
  const double p = s.projection;
  std::vector<io::TensorToWrite> tensors;
  if (s.architecture == io::Architecture::kHuginn) {
    tensors = huginn_tensors(s, rng);
  } else {
    tensors.push_back(bf16_tensor("model.embed_tokens.weight", {s.vocab, s.hidden}, rng, 0.0, s.embedding));
  }
  for (int64_t i = 0; i < s.layers && s.architecture != io::Architecture::kHuginn; ++i) {
    auto name = [&](const char* suffix) { return fmt::format("model.layers.{}.{}", i, suffix); };
    tensors.push_back(bf16_tensor(name("self_attn.q_proj.weight"), {s.heads * s.head_dim, s.hidden}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("self_attn.k_proj.weight"), {s.kv_heads * s.head_dim, s.hidden}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("self_attn.v_proj.weight"), {s.kv_heads * s.head_dim, s.hidden}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("self_attn.o_proj.weight"), {s.hidden, s.heads * s.head_dim}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("mlp.gate_proj.weight"), {s.intermediate, s.hidden}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("mlp.up_proj.weight"), {s.intermediate, s.hidden}, rng, 0, p));
    tensors.push_back(bf16_tensor(name("mlp.down_proj.weight"), {s.hidden, s.intermediate}, rng, 0, p));
    const bool ouro = s.architecture == io::Architecture::kOuro;
    for (const char* norm : {"input_layernorm.weight", "input_layernorm_2.weight",
                             "post_attention_layernorm.weight", "post_attention_layernorm_2.weight"}) {
      const bool sandwich_only = std::string_view(norm).ends_with("_2.weight");
      if (ouro || !sandwich_only) tensors.push_back(bf16_tensor(name(norm), {s.hidden}, rng, 1.0, 0.2));
    }
  }
  if (s.architecture != io::Architecture::kHuginn) {
    tensors.push_back(bf16_tensor("model.norm.weight", {s.hidden}, rng, 1.0, 0.2));
    if (s.architecture == io::Architecture::kOuro) {
      tensors.push_back(bf16_tensor("model.early_exit_gate.weight", {1, s.hidden}, rng, 0.0, 0.15));
      tensors.push_back(bf16_tensor("model.early_exit_gate.bias", {1}, rng, -1.5, 0.0));
    }
    tensors.push_back(bf16_tensor("lm_head.weight", {s.vocab, s.hidden}, rng, 0.0, s.head));
  }
  RLT_RETURN_IF_ERROR(io::write_safetensors((dir / "model.safetensors").string(), std::move(tensors)));
  RLT_RETURN_IF_ERROR(write_json(dir / "config.json", demo_config(s)));
  RLT_RETURN_IF_ERROR(write_json(dir / "generation_config.json",
                                 ordered_json{{"bos_token_id", s.bos_token_id}, {"eos_token_id", s.eos_token_id}}));
  if (!s.byte_tokenizer) return {};
  if (s.vocab != kDemoShape.vocab)
    return invalid_argument(fmt::format("the byte-level tokenizer needs a vocabulary of {}", kDemoShape.vocab));
  RLT_RETURN_IF_ERROR(write_json(dir / "tokenizer.json", demo_tokenizer()));
  return write_json(dir / "tokenizer_config.json", demo_tokenizer_config());
}

Status write_demo_checkpoint(const std::string& dir) {
  // The preset's scales: ±0.1 projections (std ≈ 0.058), norms around 1 so they are not the
  // identity, and a gate wide enough that exit probabilities vary from token to token.
  return write_random_checkpoint(dir, kDemoShape, kDemoShape.seed);
}

Result<std::string> rlt_cache_dir() {
  if (const char* d = std::getenv("RLT_CACHE_DIR"); d && *d) return std::string(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "rlt").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "rlt").string();
  return failed_precondition("rlt has no cache folder: set RLT_CACHE_DIR or HOME, or pass --model");
}

Result<std::string> ensure_demo_checkpoint() {
  RLT_ASSIGN_OR_RETURN(std::string cache, rlt_cache_dir());
  const fs::path root = cache;
  const fs::path dir = root / kDemoModelName;
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec)) return dir.string();
  // Build in a private folder and rename, so a concurrent or interrupted run never leaves a
  // half-written demo behind.
  const fs::path tmp = root / fmt::format(".{}.tmp-{}", kDemoModelName, ::getpid());
  RLT_RETURN_IF_ERROR(write_demo_checkpoint(tmp.string()));
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!fs::exists(dir / "model.safetensors")) return io_error(fmt::format("cannot create '{}'", dir.string()));
  }
  return dir.string();
}

}  // namespace rlt::model
