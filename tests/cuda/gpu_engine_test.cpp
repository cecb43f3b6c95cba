// The GPU engine against the CPU engine: on an f32 copy of the demo model (f32 weights, f32 K/V),
// greedy decoding gives the same tokens and exit depths. Both compute in f32; they differ in
// summation order (cuBLAS, tree reductions) by a few ulps, far below the demo model's logit
// margins.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "gpu_test_util.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "kernels/cpu/weight_matrix.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"

namespace rlt {
namespace {

// The demo checkpoint with every tensor widened to f32 (config and tokenizer copied as they are).
std::string f32_demo_dir() {
  namespace fs = std::filesystem;
  const fs::path base =
      fs::temp_directory_path() / ("rlt_gpu_engine_test_" + std::to_string(::getpid()));
  const fs::path bf16 = base / "bf16", f32 = base / "f32";
  if (!model::write_demo_checkpoint(bf16.string()).ok())
    throw std::runtime_error("cannot write the demo");
  fs::create_directories(f32);
  for (const auto& e : fs::directory_iterator(bf16)) {
    if (e.path().filename() != "model.safetensors")
      fs::copy_file(e.path(), f32 / e.path().filename());
  }
  auto ckpt = io::Checkpoint::open_dir(bf16.string());
  if (!ckpt.ok()) throw std::runtime_error(ckpt.status().to_string());
  std::vector<io::TensorToWrite> tensors;
  for (const auto& [name, view] : ckpt->tensors()) {
    io::TensorToWrite t;
    t.name = name;
    t.dtype = DType::kF32;
    t.shape = view.shape;
    std::vector<float> values(static_cast<size_t>(view.numel()));
    kernels::WeightMatrix{view.dtype, 1, view.numel(), view.data}.row_to_f32(0, values.data());
    t.bytes.resize(values.size() * sizeof(float));
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    tensors.push_back(std::move(t));
  }
  if (!io::write_safetensors((f32 / "model.safetensors").string(), std::move(tensors)).ok())
    throw std::runtime_error("cannot write the f32 demo");
  return f32.string();
}

struct Generation {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<int32_t>> depths;
};

Generation generate(const std::string& dir, const std::string& device, const std::string& layout) {
  EngineConfig c;
  c.model_dir = dir;
  c.device = device;
  c.kv_dtype = "f32";
  c.kv_layout = layout;
  c.max_num_seqs = 4;
  c.prefill_chunk_size = 7;  // several chunks per prompt
  auto engine = Engine::create(c);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  Generation run;
  if (!engine.ok()) return run;
  const std::vector<std::vector<int32_t>> prompts = {
      {5, 9, 13},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {42},
      {100, 7, 100, 7, 100, 7, 100, 7}};
  SamplingParams p;
  p.max_tokens = 12;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE((*engine)->add_request(10 + i, prompts[i], p).ok());
  }
  run.tokens.resize(prompts.size());
  run.depths.resize(prompts.size());
  size_t finished = 0;
  for (int step = 0; step < 10000 && finished < prompts.size(); ++step) {
    auto outputs = (*engine)->step();
    EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
    if (!outputs.ok()) break;
    for (const auto& o : *outputs) {
      if (!o.finished) continue;
      run.tokens[o.request_id - 10] = o.token_ids;
      run.depths[o.request_id - 10] = o.exit_depths;
      ++finished;
    }
  }
  EXPECT_EQ(finished, prompts.size());
  return run;
}

TEST(GpuEngine, GreedyTokensEqualTheCpuEngineInF32) {
  RLT_REQUIRE_CUDA_DEVICE();
  set_log_level(LogLevel::kWarn);
  const std::string dir = f32_demo_dir();
  for (const char* layout : {"last_exited", "shared"}) {
    const Generation cpu = generate(dir, "cpu", layout);
    const Generation gpu = generate(dir, "cuda", layout);
    EXPECT_EQ(gpu.tokens, cpu.tokens) << layout;
    EXPECT_EQ(gpu.depths, cpu.depths) << layout;
  }
}

TEST(GpuEngine, BadDeviceChoicesAreClearErrors) {
  EngineConfig c;
  c.model_dir = "/nonexistent";
  c.device = "cuda:banana";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("expected cpu, cuda or cuda:N"), std::string::npos)
      << e.status().message();
  c.device = "cuda:99";
  e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--device cuda:99"), std::string::npos)
      << e.status().message();
}

}  // namespace
}  // namespace rlt
