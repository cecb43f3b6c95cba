#include "model/demo_checkpoint.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/safetensors_writer.h"
#include "model/ouro_weights.h"
#include "model_test_util.h"

namespace rlt::model {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(DemoCheckpoint, IsByteIdenticalEveryTime) {
  auto other = fs::temp_directory_path() / ("rlt_demo_again_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_demo_checkpoint(other.string()).ok());
  for (const char* f : {"model.safetensors", "config.json", "tokenizer.json",
                        "tokenizer_config.json", "generation_config.json"}) {
    EXPECT_EQ(slurp(fs::path(testing::demo_dir()) / f), slurp(other / f)) << f;
  }
  fs::remove_all(other);
}

// `rlt make-model --preset demo` writes the demo, tokenizer included.
TEST(RandomCheckpoint, TheDemoPresetIsTheDemo) {
  auto shape = random_checkpoint_preset("demo");
  ASSERT_TRUE(shape.ok());
  auto dir = fs::temp_directory_path() / ("rlt_random_demo_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_random_checkpoint(dir.string(), *shape, shape->seed).ok());
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json"}) {
    EXPECT_EQ(slurp(fs::path(testing::demo_dir()) / f), slurp(dir / f)) << f;
  }
  ASSERT_TRUE(write_random_checkpoint(dir.string(), *shape, 7).ok());
  EXPECT_NE(slurp(fs::path(testing::demo_dir()) / "model.safetensors"),
            slurp(dir / "model.safetensors"))
      << "another seed, other weights";
  fs::remove_all(dir);
}

TEST(RandomCheckpoint, PresetsAndUnknownNames) {
  auto big = random_checkpoint_preset("ouro-1.4b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->hidden, 2048);
  EXPECT_EQ(big->layers, 24);
  EXPECT_EQ(big->vocab, 49152);
  EXPECT_EQ(big->heads * big->head_dim, 2048);
  EXPECT_DOUBLE_EQ(big->projection * big->projection, 3.0 / 2048) << "unit-variance outputs";
  auto bad = random_checkpoint_preset("ouro-7b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected one of demo, ouro-1.4b, ouro-2.6b"), std::string::npos);
  auto big2 = random_checkpoint_preset("ouro-2.6b");
  ASSERT_TRUE(big2.ok());
  EXPECT_EQ(big2->layers, 48);
  EXPECT_EQ(big2->hidden, 2048);
  auto nanbeige = random_checkpoint_preset("nanbeige-4.2-3b");
  ASSERT_TRUE(nanbeige.ok());
  EXPECT_EQ(nanbeige->architecture, io::Architecture::kNanbeige);
  EXPECT_EQ(nanbeige->heads * nanbeige->head_dim, 6144) << "query heads wider than the hidden size";
  EXPECT_EQ(nanbeige->vocab, 166144);
  EXPECT_EQ(nanbeige->loops, 2);
  for (const RandomCheckpointPreset& p : random_checkpoint_presets())
    EXPECT_TRUE(random_checkpoint_preset(p.name).ok()) << p.name;
}

// nanbeige-tiny writes a Nanbeige checkpoint (no sandwich norms, no gate, num_loops) that loads,
// with the byte-level tokenizer.
TEST(RandomCheckpoint, NanbeigeTinyLoadsAsANanbeigeModel) {
  auto shape = random_checkpoint_preset("nanbeige-tiny");
  ASSERT_TRUE(shape.ok());
  auto dir = fs::temp_directory_path() / ("rlt_random_nanbeige_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_random_checkpoint(dir.string(), *shape, shape->seed).ok());
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json"));
  auto m = load_ouro_model(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->config.architecture, io::Architecture::kNanbeige);
  EXPECT_EQ((*m)->config.total_ut_steps, 2);
  EXPECT_FALSE((*m)->config.has_exit_gate());
  EXPECT_FALSE((*m)->config.sandwich_norms());
  EXPECT_EQ((*m)->config.q_dim(), 288);
  EXPECT_TRUE((*m)->weights.exit_gate_weight.empty());
  fs::remove_all(dir);
}

// Any shape writes a checkpoint that loads and validates as an Ouro model.
TEST(RandomCheckpoint, AnyShapeLoadsAsAnOuroModel) {
  RandomCheckpointShape s{.vocab = 300,
                          .hidden = 64,
                          .intermediate = 160,
                          .layers = 3,
                          .heads = 4,
                          .kv_heads = 1,
                          .head_dim = 16,
                          .loops = 2,
                          .max_positions = 512};
  auto dir = fs::temp_directory_path() / ("rlt_random_shape_" + std::to_string(::getpid()));
  ASSERT_TRUE(write_random_checkpoint(dir.string(), s, 3).ok());
  auto m = load_ouro_model(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->config.vocab_size, 300);
  EXPECT_EQ((*m)->config.num_layers, 3);
  EXPECT_EQ((*m)->config.num_kv_heads, 1);
  EXPECT_EQ((*m)->config.total_ut_steps, 2);
  EXPECT_EQ((*m)->weight_dtype(), DType::kBF16);
  fs::remove_all(dir);
}

// The demo's weights are pinned: caches keyed by kDemoModelName hold these bytes, so a change must
// come with a new name (and this hash).
TEST(DemoCheckpoint, WeightsArePinned) {
  const std::string weights = slurp(fs::path(testing::demo_dir()) / "model.safetensors");
  EXPECT_EQ(weights.size(), 6079602u);
  EXPECT_EQ(XXH3_64bits(weights.data(), weights.size()), 0x351ca792c6159b92ull)
      << "the demo's bytes changed: bump kDemoModelName";
}

TEST(DemoCheckpoint, LoadsAsAValidOuroModel) {
  auto m = testing::demo_model();
  EXPECT_EQ(m->config.total_ut_steps, 4);
  EXPECT_EQ(m->config.num_kv_heads * 2, m->config.num_heads);
  EXPECT_EQ(m->weight_dtype(), DType::kBF16);
  EXPECT_EQ(m->eos_token_ids(), std::vector<int64_t>{0});
}

TEST(LoadOuroModel, GpuLoadsSkipTheCpuPackingButKeepTheRooflineBytes) {
  auto unpacked = load_ouro_model(testing::demo_dir(), {.pack_for_cpu = false});
  ASSERT_TRUE(unpacked.ok()) << unpacked.status().to_string();
  const OuroModel& m = **unpacked;
  EXPECT_EQ(m.weights.layers[0].qkv.bytes(), 0) << "no packed copy";
  EXPECT_EQ(m.weights.lm_head.bytes(), 0);
  int64_t linear = 0;
  for (const auto& [name, t] : m.checkpoint.tensors()) {
    if (name.find("_proj.weight") != std::string::npos) linear += static_cast<int64_t>(t.nbytes);
  }
  EXPECT_EQ(m.core_weight_bytes_per_loop(), linear);
  const char* head = m.config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  EXPECT_EQ(m.lm_head_bytes(), static_cast<int64_t>(m.checkpoint.find(head)->nbytes));
}

TEST(DemoCheckpoint, EnsureCreatesOnceUnderCacheDir) {
  auto root = fs::temp_directory_path() / ("rlt_demo_cache_" + std::to_string(::getpid()));
  ::setenv("RLT_CACHE_DIR", root.c_str(), 1);
  auto dir = ensure_demo_checkpoint();
  ASSERT_TRUE(dir.ok()) << dir.status().to_string();
  EXPECT_EQ(fs::path(*dir), root / kDemoModelName);
  auto again = ensure_demo_checkpoint();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *dir);
  ::unsetenv("RLT_CACHE_DIR");
  fs::remove_all(root);
}

TEST(LoadOuroModel, NamesMissingTensorsAndTheFolder) {
  auto dir = fs::temp_directory_path() / ("rlt_broken_model_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fs::path(testing::demo_dir()) / "config.json", dir / "config.json",
                fs::copy_options::overwrite_existing);
  std::vector<io::TensorToWrite> one = {
      {"lm_head.weight", DType::kBF16, {259, 256}, std::vector<uint8_t>(259 * 256 * 2)}};
  ASSERT_TRUE(io::write_safetensors((dir / "model.safetensors").string(), one).ok());
  auto m = load_ouro_model(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(dir.string()), std::string::npos);
  EXPECT_NE(m.status().message().find("missing tensor(s): model.embed_tokens.weight"),
            std::string::npos)
      << m.status().message();
  fs::remove_all(dir);
}

TEST(LoadOuroModel, ReportsMissingModelsAndConfigs) {
  auto m = load_ouro_model("/nonexistent-model-dir");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'/nonexistent-model-dir' does not exist"), std::string::npos)
      << m.status().to_string();
  const auto empty = fs::temp_directory_path() / ("rlt_empty_model_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  auto e = load_ouro_model(empty.string());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("folder without config.json"), std::string::npos) << e.status().to_string();
  const auto junk = empty / "model.bin";
  std::ofstream(junk) << "not a model";
  auto j = load_ouro_model(junk.string());
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("neither a folder nor a GGUF file"), std::string::npos) << j.status().to_string();
  fs::remove_all(empty);
}

}  // namespace
}  // namespace rlt::model
