// A tiny but complete GGUF model for the tests: llama or ouro metadata, a byte-pair tokenizer, a
// chat template, and one layer of tensors in a mix of GGML types (so the parser, the model reader,
// the dequantization and the tokenizer all see real work).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "io/gguf_writer.h"
#include "quant/ggml_type.h"
#include "quant/random_blocks.h"

namespace rlt::io::testing {

struct TinyGguf {
  bool ouro = false;
  bool nanbeige = false;  // llama.cpp's nanbeige: llama tensors, nanbeige.num_loops = 2
  bool skip_loop_final_norm = false;  // nanbeige only
  bool loops = true;                  // nanbeige only: write nanbeige.num_loops
  bool exit_gate = false;  // ouro only: rlt's exit_gate tensors
  bool tied = true;        // no output.weight
  int64_t hidden = 32, heads = 2, kv_heads = 1, intermediate = 64, layers = 1, vocab = 32;
};

// Random bytes of a tensor of `type`: floats of small magnitude, or GGML blocks with finite f16
// scales (quant::random_blocks).
inline std::vector<uint8_t> random_tensor_bytes(quant::GgmlType type, int64_t rows, int64_t cols,
                                                std::mt19937& rng) {
  const auto info = *quant::ggml_type_info(static_cast<uint32_t>(type));
  std::vector<uint8_t> b(static_cast<size_t>(*quant::ggml_row_bytes(type, cols) * rows));
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.1f, 0.1f);
  auto half_at = [&](size_t at) {
    const uint16_t h =
        type == quant::GgmlType::kBF16 ? f32_to_bf16(scale(rng)) : f32_to_f16(scale(rng));
    std::memcpy(b.data() + at, &h, 2);
  };
  if (type == quant::GgmlType::kF32) {
    for (size_t i = 0; i < b.size(); i += 4) {
      const float f = scale(rng);
      std::memcpy(b.data() + i, &f, 4);
    }
  } else if (type == quant::GgmlType::kF16 || type == quant::GgmlType::kBF16) {
    for (size_t i = 0; i < b.size(); i += 2) half_at(i);
  } else if (info.block_elems > 1) {  // quant::random_blocks sets each type's f16 fields
    b = quant::random_blocks(type, rows * cols / info.block_elems, static_cast<uint32_t>(rng()));
  }
  return b;
}

inline GgufWriter tiny_gguf_writer(const TinyGguf& m, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  GgufWriter w;
  const std::string arch = m.ouro ? "ouro" : m.nanbeige ? "nanbeige" : "llama";
  w.add_string("general.architecture", arch);
  w.add_string("general.name", "tiny");
  w.add_u32(arch + ".context_length", 256);
  w.add_u32(arch + ".embedding_length", static_cast<uint32_t>(m.hidden));
  w.add_u32(arch + ".block_count", static_cast<uint32_t>(m.layers));
  w.add_u32(arch + ".feed_forward_length", static_cast<uint32_t>(m.intermediate));
  w.add_u32(arch + ".attention.head_count", static_cast<uint32_t>(m.heads));
  w.add_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(m.kv_heads));
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_f32(arch + ".rope.freq_base", 10000.0f);
  w.add_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(m.hidden / m.heads));
  if (m.ouro) w.add_u32("ouro.num_loops", 3);
  if (m.nanbeige) {
    if (m.loops) w.add_u32("nanbeige.num_loops", 2);
    w.add_bool("nanbeige.skip_loop_final_norm", m.skip_loop_final_norm);
  }
  // A byte-pair vocabulary: two specials, the letters, the space marker, two merges, padding.
  std::vector<std::string> tokens = {"<s>", "</s>"};
  for (char c = 'a'; c <= 'z'; ++c) tokens.emplace_back(1, c);
  tokens.push_back("\xC4\xA0");  // Ġ, the byte-level space
  tokens.push_back("ab");
  tokens.push_back(
      "\xC4\xA0"
      "a");
  while (static_cast<int64_t>(tokens.size()) < m.vocab)
    tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = types[1] = 3;
  for (size_t i = 31; i < types.size(); ++i) types[i] = 5;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "smollm");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"a b", "\xC4\xA0 a"});
  w.add_u32("tokenizer.ggml.bos_token_id", 0);
  w.add_u32("tokenizer.ggml.eos_token_id", 1);
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_string("tokenizer.chat_template",
               "{% for m in messages %}{{ bos_token }}{{ m['content'] }}{% endfor %}");

  using quant::GgmlType;
  const int64_t h = m.hidden, head_dim = m.hidden / m.heads, kv = m.kv_heads * head_dim,
                f = m.intermediate;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, GgmlType type) {
    const int64_t cols = ne[0], rows = ne.size() > 1 ? ne[1] : 1;
    (void)w.add_tensor(name, ne, type, random_tensor_bytes(type, rows, cols, rng));
  };
  add("token_embd.weight", {h, m.vocab}, GgmlType::kQ8_0);
  add("output_norm.weight", {h}, GgmlType::kF32);
  if (!m.tied) add("output.weight", {h, m.vocab}, GgmlType::kQ4_0);
  if (m.ouro && m.exit_gate) {
    add("exit_gate.weight", {h, 1}, GgmlType::kF32);
    add("exit_gate.bias", {1}, GgmlType::kF32);
  }
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {h}, GgmlType::kF32);
    add(p + "ffn_norm.weight", {h}, GgmlType::kF32);
    if (m.ouro) {
      add(p + "post_attention_norm.weight", {h}, GgmlType::kF32);
      add(p + "post_ffw_norm.weight", {h}, GgmlType::kF32);
    }
    add(p + "attn_q.weight", {h, h}, GgmlType::kQ4_0);
    add(p + "attn_k.weight", {h, kv}, GgmlType::kQ4_1);
    add(p + "attn_v.weight", {h, kv}, GgmlType::kQ5_0);
    add(p + "attn_output.weight", {h, h}, GgmlType::kQ5_1);
    add(p + "ffn_gate.weight", {h, f}, GgmlType::kQ8_0);
    add(p + "ffn_up.weight", {h, f}, GgmlType::kF16);
    add(p + "ffn_down.weight", {f, h}, GgmlType::kBF16);
  }
  return w;
}

inline std::vector<uint8_t> tiny_gguf(const TinyGguf& m = {}, uint32_t seed = 7) {
  return tiny_gguf_writer(m, seed).serialize();
}

}  // namespace rlt::io::testing
