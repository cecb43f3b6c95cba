// --quantize: a safetensors checkpoint's linear layers quantized at load compute the function of
// the model whose weights are those blocks dequantized (within f32 rounding), embedding, norms
// and exit gate untouched; widths the K-quants cannot divide fall back to Q8_0 and say so.
#include "model/quantize_on_load.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/linear_quant_int8.h"
#include "model/demo_checkpoint.h"
#include "model/ouro_weights.h"
#include "model/reference_model.h"
#include "quant/dequantize.h"

namespace rlt::model {
namespace {

class QuantizeOnLoad : public ::testing::Test {
 protected:
  static std::string write(const std::string& tag, int64_t hidden) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("rlt_quantize_on_load_" + tag + "_" + std::to_string(::getpid()));
    RandomCheckpointShape s{.vocab = 300,
                            .hidden = hidden,
                            .intermediate = 2 * hidden,
                            .layers = 2,
                            .heads = 4,
                            .kv_heads = 2,
                            .head_dim = hidden / 4,
                            .loops = 2,
                            .max_positions = 128};
    s.projection = s.head = std::sqrt(3.0 / static_cast<double>(hidden));
    EXPECT_TRUE(write_random_checkpoint(dir.string(), s, 5).ok());
    dirs_.push_back(dir);
    return dir.string();
  }
  static void TearDownTestSuite() {
    for (const auto& d : dirs_) std::filesystem::remove_all(d);
  }
  static inline std::vector<std::filesystem::path> dirs_;
};

// The model whose linear weights are `quantized`'s blocks dequantized to f32. The blocks are made
// again from the folder (a loaded model frees them once they are packed).
std::shared_ptr<const OuroModel> dequantized_twin(const OuroModel& quantized, QuantizeType type) {
  auto twin = std::make_shared<OuroModel>();
  twin->dir = quantized.dir;
  twin->config = quantized.config;
  twin->generation = quantized.generation;
  std::vector<std::string> notes;
  auto blocks = quantize_linear_weights(*io::Checkpoint::open_dir(quantized.dir), quantized.config,
                                        type, &notes);
  EXPECT_TRUE(blocks.ok()) << blocks.status().to_string();
  EXPECT_TRUE(blocks->materialize_all().ok());
  std::vector<io::TensorView> views;
  std::vector<std::shared_ptr<const void>> owners;
  for (const auto& [name, t] : blocks->tensors()) {
    io::TensorView v = t;
    if (t.quant) {
      auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(t.numel()));
      const int64_t rows = t.shape[0], cols = t.shape[1];
      const int64_t row_bytes = *quant::ggml_row_bytes(*t.quant, cols);
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_TRUE(
            quant::dequantize_row(*t.quant, t.data + r * row_bytes, cols, buf->data() + r * cols)
                .ok());
      v.quant.reset();
      v.dtype = DType::kF32;
      v.data = reinterpret_cast<const uint8_t*>(buf->data());
      v.nbytes = buf->size() * 4;
      owners.push_back(buf);
    }
    views.push_back(v);
  }
  twin->checkpoint =
      std::move(*io::Checkpoint::from_views(std::move(views), std::move(owners), {}));
  twin->weights = std::move(*bind_ouro_weights(twin->checkpoint, twin->config));
  return twin;
}

TEST_F(QuantizeOnLoad, ComputesTheDequantizedModel) {
  const std::string dir = write("q", 256);
  for (QuantizeType type : {QuantizeType::kQ8_0, QuantizeType::kQ4_K, QuantizeType::kQ6_K}) {
    SCOPED_TRACE(std::string(name(type)));
    LoadOptions options;
    options.quantize = type;
    auto model = load_ouro_model(dir, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const OuroModel& m = **model;
    EXPECT_TRUE(m.load_notes.empty());
    EXPECT_TRUE(m.weights.layers[0].qkv.quantized());
    EXPECT_TRUE(m.weights.layers[1].down_proj.quantized());
    ASSERT_FALSE(m.config.tie_word_embeddings);
    EXPECT_TRUE(m.weights.lm_head.quantized()) << "an untied lm head is a linear layer";
    EXPECT_FALSE(m.checkpoint.find("model.embed_tokens.weight")->quant.has_value());
    const std::string expected = type == QuantizeType::kQ8_0   ? "Q8_0"
                                 : type == QuantizeType::kQ4_K ? "Q4_K"
                                                               : "Q6_K";
    EXPECT_EQ(m.quantized_types(), expected);

    const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79};
    ReferenceModel quantized(*model), twin(dequantized_twin(m, type));
    auto a = quantized.generate(prompt, 6, {1, 2, 1.0}, true);
    auto b = twin.generate(prompt, 6, {1, 2, 1.0}, true);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens, b->tokens);
    auto la = ReferenceModel(*model).prefill(prompt),
         lb = ReferenceModel(dequantized_twin(m, type)).prefill(prompt);
    ASSERT_TRUE(la.ok() && lb.ok());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < la->logits.size(); ++i) {
      worst = std::max(worst, std::fabs(double(la->logits[i]) - lb->logits[i]));
      scale = std::max(scale, std::fabs(double(lb->logits[i])));
    }
    // f32 sums in two orders (per-group inner sums vs one chain) over 256..512-long products.
    EXPECT_LT(worst / scale, 1e-4);
  }
}

TEST_F(QuantizeOnLoad, WidthsTheKQuantsCannotDivideFallBackToQ8_0) {
  const std::string dir = write("fallback", 96);  // 96 columns: not a whole 256-value block
  LoadOptions options;
  options.quantize = QuantizeType::kQ4_K;
  auto model = load_ouro_model(dir, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->quantized_types(), "Q8_0");
  ASSERT_FALSE((*model)->load_notes.empty());
  EXPECT_NE((*model)->load_notes[0].find("Q8_0"), std::string::npos) << (*model)->load_notes[0];
}

TEST_F(QuantizeOnLoad, RefusedWhereItCannotApply) {
  const std::string dir = write("refuse", 256);
  LoadOptions gpu;
  gpu.quantize = QuantizeType::kQ8_0;
  gpu.pack_for_cpu = false;
  auto a = load_ouro_model(dir, gpu);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--device cuda"), std::string::npos)
      << a.status().to_string();
}

// --activation-dtype int8: the quantized matrices take the int8 layout, and the logits move by the
// activations' rounding only (a relative 1/254 of each group's largest activation per product:
// about 1 % of the logits' range here, against 1e-4 with f32 activations).
TEST_F(QuantizeOnLoad, Int8ActivationsTrackF32Activations) {
  if (!kernels::linear_quant_int8_supported()) GTEST_SKIP() << "this CPU has no int8 kernel";
  const std::string dir = write("int8", 256);
  LoadOptions f32, int8;
  f32.quantize = int8.quantize = QuantizeType::kQ4_K;
  int8.int8_activations = true;
  auto a = load_ouro_model(dir, f32), b = load_ouro_model(dir, int8);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().to_string();
  EXPECT_EQ((*b)->weights.layers[0].qkv.layout(), kernels::PackedMatrix::Layout::kQuantInt8);
  EXPECT_EQ((*b)->weights.layers[1].gate_up.layout(), kernels::PackedMatrix::Layout::kQuantInt8);
  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65, 35, 89, 79};
  auto la = ReferenceModel(*a).prefill(prompt), lb = ReferenceModel(*b).prefill(prompt);
  ASSERT_TRUE(la.ok() && lb.ok());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < la->logits.size(); ++i) {
    worst = std::max(worst, std::fabs(double(la->logits[i]) - lb->logits[i]));
    scale = std::max(scale, std::fabs(double(la->logits[i])));
  }
  EXPECT_GT(worst, 0.0) << "int8 activations computed the f32 path";
  EXPECT_LT(worst / scale, 0.05);
}

TEST_F(QuantizeOnLoad, Int8ActivationsNeedQuantizedWeights) {
  if (!kernels::linear_quant_int8_supported()) GTEST_SKIP() << "this CPU has no int8 kernel";
  const std::string dir = write("int8_float", 256);
  LoadOptions options;
  options.int8_activations = true;
  auto model = load_ouro_model(dir, options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("--quantize"), std::string::npos)
      << model.status().to_string();
}

}  // namespace
}  // namespace rlt::model
