// GGUF files as models: metadata -> ModelConfig, tensors -> the Hugging Face names with Q/K rows
// back in Hugging Face order and quantized tensors dequantized into the asked dtype.
#include "io/gguf_model.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/half.h"
#include "gguf_test_util.h"
#include "model/ouro_weights.h"
#include "quant/dequantize.h"

namespace rlt::io {
namespace {

std::shared_ptr<const GgufFile> open_bytes(const std::vector<uint8_t>& bytes) {
  // The file keeps pointers into the bytes: tests keep them alive in a static pool.
  static std::vector<std::unique_ptr<std::vector<uint8_t>>> pool;
  pool.push_back(std::make_unique<std::vector<uint8_t>>(bytes));
  auto f = GgufFile::parse(pool.back()->data(), pool.back()->size(), "tiny.gguf");
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? *f : nullptr;
}

TEST(GgufModel, ReadsTheLlamaConfig) {
  auto f = open_bytes(testing::tiny_gguf());
  auto info = read_gguf_model_info(*f);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  const ModelConfig& c = info->config;
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 64);
  EXPECT_EQ(c.vocab_size, 32);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.total_ut_steps, 1);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rms_norm_eps, static_cast<double>(1e-5f));
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.bos_token_id, 0);
}

TEST(GgufModel, OuroWithoutTheExitGateRunsFullDepthAndSaysWhy) {
  auto f = open_bytes(testing::tiny_gguf({.ouro = true}));
  auto info = read_gguf_model_info(*f);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->config.total_ut_steps, 3);
  EXPECT_FALSE(info->config.has_exit_gate());
  ASSERT_FALSE(info->notes.empty());
  EXPECT_NE(info->notes.back().find("no exit gate"), std::string::npos);
  auto gated =
      read_gguf_model_info(*open_bytes(testing::tiny_gguf({.ouro = true, .exit_gate = true})));
  ASSERT_TRUE(gated.ok());
  EXPECT_TRUE(gated->config.has_exit_gate());
}

// llama.cpp's nanbeige: block_count physical layers, num_loops passes, no gate.
TEST(GgufModel, ReadsNanbeigeAsALoopedLlama) {
  auto info = read_gguf_model_info(*open_bytes(testing::tiny_gguf({.nanbeige = true})));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->config.architecture, Architecture::kNanbeige);
  EXPECT_EQ(info->config.model_type, "nanbeige");
  EXPECT_EQ(info->config.num_layers, 1);
  EXPECT_EQ(info->config.total_ut_steps, 2);
  EXPECT_FALSE(info->config.has_exit_gate());
  EXPECT_FALSE(info->config.sandwich_norms());
  auto refused = read_gguf_model_info(
      *open_bytes(testing::tiny_gguf({.nanbeige = true, .skip_loop_final_norm = true})));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("skip_loop_final_norm = true"), std::string::npos)
      << refused.status().to_string();
  auto no_loops = read_gguf_model_info(*open_bytes(testing::tiny_gguf({.nanbeige = true, .loops = false})));
  ASSERT_FALSE(no_loops.ok());
  EXPECT_NE(no_loops.status().message().find("'nanbeige.num_loops' is required"), std::string::npos)
      << no_loops.status().to_string();
}

TEST(GgufModel, TensorsBindUnderTheirHuggingFaceNames) {
  for (bool ouro : {false, true}) {
    SCOPED_TRACE(ouro ? "ouro" : "llama");
    auto f = open_bytes(testing::tiny_gguf({.ouro = ouro, .exit_gate = ouro, .tied = !ouro}));
    auto info = read_gguf_model_info(*f);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    for (DType d : {DType::kBF16, DType::kF32, DType::kF16}) {
      auto ckpt = gguf_checkpoint(f, info->config, d);
      ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
      Status v = validate_tensor_set(*ckpt, model::ouro_expected_tensors(info->config));
      EXPECT_TRUE(v.ok()) << v.to_string();
      EXPECT_EQ(ckpt->find("model.embed_tokens.weight")->dtype, d)
          << "Q8_0 dequantized to the asked dtype";
      EXPECT_EQ(ckpt->find("model.layers.0.mlp.up_proj.weight")->dtype, DType::kF16)
          << "float tensors kept";
      EXPECT_EQ(ckpt->find("model.norm.weight")->dtype, DType::kF32);
      EXPECT_EQ(ckpt->find("model.norm.weight")->data, f->find_tensor("output_norm.weight")->data)
          << "used in place";
      auto plan = gguf_tensor_plan(*f, info->config, d);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(plan->size(), ckpt->tensors().size());
    }
  }
}

TEST(GgufModel, QkRowsComeBackInHuggingFaceOrder) {
  // F32 Q rows filled with their own GGUF row index: after loading, Hugging Face row R of head h
  // (first half i, second half d/2 + i) must hold GGUF row h*d + 2i (+1 for the second half).
  testing::TinyGguf m;
  GgufWriter w = testing::tiny_gguf_writer(m);
  auto bytes = w.serialize();
  auto f = open_bytes(bytes);
  auto info = read_gguf_model_info(*f);
  ASSERT_TRUE(info.ok());
  const GgufTensor* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  // Rewrite the Q tensor as F32 with recognizable rows in a second file.
  GgufWriter w2;
  for (const auto& [k, v] : f->metadata()) w2.add(k, v);
  for (const GgufTensor& t : f->tensors()) {
    std::vector<uint8_t> data(t.data, t.data + t.nbytes);
    quant::GgmlType type = t.type;
    if (t.name == "blk.0.attn_q.weight") {
      type = quant::GgmlType::kF32;
      data.assign(static_cast<size_t>(t.numel()) * 4, 0);
      for (int64_t r = 0; r < t.rows(); ++r)
        for (int64_t c = 0; c < t.row_elems(); ++c) {
          const float x = static_cast<float>(r);
          std::memcpy(data.data() + 4 * (r * t.row_elems() + c), &x, 4);
        }
    }
    ASSERT_TRUE(w2.add_tensor(t.name, t.ne, type, data).ok());
  }
  auto f2 = open_bytes(w2.serialize());
  auto ckpt = gguf_checkpoint(f2, info->config, DType::kBF16);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const TensorView* hq = ckpt->find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(hq->dtype, DType::kF32) << "a float tensor only reordered keeps its type";
  const int64_t d = info->config.head_dim, cols = info->config.hidden_size;
  for (int64_t row = 0; row < info->config.q_dim(); ++row) {
    float got;
    std::memcpy(&got, hq->data + 4 * row * cols, 4);
    const int64_t head = row / d, r = row % d;
    const int64_t expected = head * d + (r < d / 2 ? 2 * r : 2 * (r - d / 2) + 1);
    EXPECT_EQ(got, static_cast<float>(expected)) << "row " << row;
  }
}

TEST(GgufModel, MisalignedFloatTensorsAreCopiedNotUsedInPlace) {
  // general.alignment 2 leaves F32 data at addresses that need not be multiples of 4.
  GgufWriter w(2);
  GgufWriter base = testing::tiny_gguf_writer({});
  auto f0 = open_bytes(base.serialize());
  for (const auto& [k, v] : f0->metadata()) w.add(k, v);
  for (const GgufTensor& t : f0->tensors())
    ASSERT_TRUE(w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok());
  // A 1-element F16 tensor first shifts every later tensor by 2 bytes.
  GgufWriter shifted(2);
  for (const auto& [k, v] : f0->metadata()) shifted.add(k, v);
  ASSERT_TRUE(shifted.add_tensor("blk.0.attn_norm.weight", {32}, quant::GgmlType::kF16, std::vector<uint8_t>(64, 0)).ok());
  for (const GgufTensor& t : f0->tensors()) {
    if (t.name == "blk.0.attn_norm.weight") continue;
    ASSERT_TRUE(shifted.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes)).ok());
  }
  for (const auto& bytes : {w.serialize(), shifted.serialize()}) {
    auto f = open_bytes(bytes);
    ASSERT_EQ(f->alignment(), 2u);
    auto info = read_gguf_model_info(*f);
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    auto ckpt = gguf_checkpoint(f, info->config, DType::kBF16);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    for (const auto& [name, v] : ckpt->tensors())
      EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype), 0u) << name;
  }
}

TEST(GgufModel, RefusesWhatItCannotCompute) {
  auto with = [](auto edit) {
    GgufWriter w = testing::tiny_gguf_writer({});
    edit(w);
    return w.serialize();
  };
  struct Case {
    std::vector<uint8_t> bytes;
    const char* needle;
  };
  const Case cases[] = {
      {with([](GgufWriter& w) { w.add_u32("llama.expert_count", 8); }), "a mixture of 8 experts"},
      {with([](GgufWriter& w) { w.add_u32("llama.attention.sliding_window", 4096); }),
       "'llama.attention.sliding_window' of architecture llama is not understood"},
      {with([](GgufWriter& w) { w.add_string("llama.rope.scaling.type", "yarn"); }),
       "RoPE scaling 'yarn'"},
      {with([](GgufWriter& w) { w.add_u32("llama.rope.dimension_count", 8); }), "partial rotary"},
  };
  for (const Case& c : cases) {
    auto f = open_bytes(c.bytes);
    auto info = read_gguf_model_info(*f);
    ASSERT_FALSE(info.ok()) << c.needle;
    EXPECT_NE(info.status().message().find(c.needle), std::string::npos)
        << info.status().to_string();
  }
  GgufWriter qwen;
  qwen.add_string("general.architecture", "qwen2");
  auto f = open_bytes(qwen.serialize());
  auto info = read_gguf_model_info(*f);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("architecture 'qwen2' is not one rlt runs"),
            std::string::npos);
}

TEST(GgufModel, SummarizesTensorTypes) {
  auto f = open_bytes(testing::tiny_gguf());
  auto summary = gguf_type_summary(*f);
  int64_t tensors = 0;
  for (const auto& t : summary) tensors += t.tensors;
  EXPECT_EQ(tensors, static_cast<int64_t>(f->tensors().size()));
  EXPECT_GE(summary.size(), 6u);
}

}  // namespace
}  // namespace rlt::io
