// `rlt convert --to gguf` (io::export_gguf): an Ouro checkpoint written as GGUF computes the same
// model as the folder at the same precision — bit for bit: the Q8_0 / Q4_K file holds the blocks
// `--quantize` makes (the same quantizer on the same rows; Q/K rows interleaved on write and put
// back on read), the bf16 file the folder's bytes — with the exit gate kept (same exit depths).
// A GGUF re-exported in its own type keeps its blocks (Q8_0's quantizer is idempotent).
#include "io/gguf_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "model/demo_checkpoint.h"
#include "model/ouro_weights.h"
#include "model/reference_model.h"
#include "source/model_source.h"

namespace rlt::model {
namespace {

namespace fs = std::filesystem;

class GgufExport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlt_gguf_export_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    RandomCheckpointShape s{.vocab = 300,
                            .hidden = 256,
                            .intermediate = 512,
                            .layers = 2,
                            .heads = 4,
                            .kv_heads = 2,
                            .head_dim = 64,
                            .loops = 3,
                            .max_positions = 128};
    s.projection = s.head = std::sqrt(3.0 / 256.0);
    ASSERT_TRUE(write_random_checkpoint(folder(), s, 9).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string folder() const { return (dir_ / "ouro").string(); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // Exports `model_path` (folder or GGUF) into `out` with its linear layers in `type`.
  static io::GgufExportReport convert(const std::string& model_path, quant::GgmlType type,
                                      const std::string& out) {
    auto src = source::ModelSource::open(model_path);
    EXPECT_TRUE(src.ok()) << src.status().to_string();
    std::set<quant::GgmlType> keep = {quant::GgmlType::kQ8_0, quant::GgmlType::kQ4_K};
    auto ckpt = src->open_checkpoint(io::QuantizedTensors(DType::kF32, keep));
    EXPECT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    io::GgufExportOptions o{.matrix_type = type, .metadata_from = src->gguf(), .name = "test"};
    auto report = io::export_gguf(*ckpt, src->config(), o, out);
    EXPECT_TRUE(report.ok()) << report.status().to_string();
    return report.ok() ? *report : io::GgufExportReport{};
  }

  static GenerateResult run(const std::string& path, LoadOptions options = {}, int64_t max_loops = 3) {
    auto model = load_ouro_model(path, options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    ReferenceModel m(*model);
    // An exit threshold the random gate crosses at different depths.
    auto out =
        m.generate(std::vector<int32_t>{3, 14, 15, 92, 65, 35, 89, 79}, 8, {1, max_loops, 0.5}, true, true);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return *out;
  }

  static void expect_same(const GenerateResult& a, const GenerateResult& b) {
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.exit_depths, b.exit_depths);
    ASSERT_EQ(a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size(); ++i)
      EXPECT_EQ(a.steps[i].logits, b.steps[i].logits) << i;
  }

  fs::path dir_;
};

TEST_F(GgufExport, QuantizedFileComputesWhatQuantizeOnLoadComputes) {
  for (auto [type, flag] : {std::pair{quant::GgmlType::kQ8_0, QuantizeType::kQ8_0},
                            std::pair{quant::GgmlType::kQ4_K, QuantizeType::kQ4_K}}) {
    SCOPED_TRACE(std::string(quant::ggml_type_name(type)));
    const std::string out = file("model.gguf");
    const io::GgufExportReport report = convert(folder(), type, out);
    // 2 layers x 7 matrices + the untied lm head in `type`; the embedding bf16; norms and gate F32.
    EXPECT_EQ(report.types.at(std::string(quant::ggml_type_name(type))), 15);
    EXPECT_EQ(report.types.at("BF16"), 1);
    auto gguf = io::GgufFile::open(out);
    ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
    EXPECT_NE((*gguf)->find_tensor("exit_gate.weight"), nullptr);
    EXPECT_NE((*gguf)->find_tensor("blk.1.attn_q.weight"), nullptr);
    LoadOptions quantized;
    quantized.quantize = flag;
    expect_same(run(out), run(folder(), quantized));
  }
}

TEST_F(GgufExport, Bf16FileComputesTheFolder) {
  const std::string out = file("bf16.gguf");
  convert(folder(), quant::GgmlType::kBF16, out);
  LoadOptions bf16;
  bf16.quantized = WeightDType::kBF16;
  expect_same(run(out, bf16), run(folder()));
}

TEST_F(GgufExport, ReexportInTheSameTypeKeepsTheBlocks) {
  const std::string first = file("a.gguf"), second = file("b.gguf");
  convert(folder(), quant::GgmlType::kQ8_0, first);
  convert(first, quant::GgmlType::kQ8_0, second);
  auto a = io::GgufFile::open(first), b = io::GgufFile::open(second);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  for (const io::GgufTensor& t : (*a)->tensors()) {
    const io::GgufTensor* u = (*b)->find_tensor(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->type, t.type) << t.name;
    ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
    EXPECT_EQ(0, std::memcmp(u->data, t.data, t.nbytes)) << t.name;
  }
  auto arch = (*b)->get_string("general.architecture");
  ASSERT_TRUE(arch.ok() && arch->has_value());
  EXPECT_EQ(**arch, "ouro");
}

// A Nanbeige checkpoint becomes llama.cpp's `nanbeige` GGUF (block_count = the physical layers,
// nanbeige.num_loops, no exit gate) that rlt reads back as the same model, in bf16 and in Q8_0.
TEST_F(GgufExport, NanbeigeFileIsLlamaCppsNanbeigeArchitecture) {
  auto shape = random_checkpoint_preset("nanbeige-tiny");
  ASSERT_TRUE(shape.ok());
  const std::string nanbeige = file("nanbeige");
  ASSERT_TRUE(write_random_checkpoint(nanbeige, *shape, 4).ok());
  const std::string bf16_out = file("nanbeige.gguf"), q8_out = file("nanbeige-q8.gguf");
  convert(nanbeige, quant::GgmlType::kBF16, bf16_out);
  auto gguf = io::GgufFile::open(bf16_out);
  ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
  auto arch = (*gguf)->get_string("general.architecture");
  ASSERT_TRUE(arch.ok() && arch->has_value());
  EXPECT_EQ(**arch, "nanbeige");
  auto loops = (*gguf)->get_int("nanbeige.num_loops");
  auto blocks = (*gguf)->get_int("nanbeige.block_count");
  ASSERT_TRUE(loops.ok() && loops->has_value() && blocks.ok() && blocks->has_value());
  EXPECT_EQ(**loops, 2);
  EXPECT_EQ(**blocks, 3);
  EXPECT_EQ((*gguf)->find_tensor("exit_gate.weight"), nullptr);
  LoadOptions bf16;
  bf16.quantized = WeightDType::kBF16;
  const GenerateResult folder_run = run(nanbeige, {}, 2);
  EXPECT_EQ(folder_run.exit_depths, std::vector<int64_t>(folder_run.exit_depths.size(), 2)) << "no gate: 2 loops";
  expect_same(run(bf16_out, bf16, 2), folder_run);
  convert(nanbeige, quant::GgmlType::kQ8_0, q8_out);
  LoadOptions quantized;
  quantized.quantize = QuantizeType::kQ8_0;
  expect_same(run(q8_out, {}, 2), run(nanbeige, quantized, 2));
}

// The demo model's 688-wide down projections: no block of 32 or 256 divides them, so they are
// written as F32 and the report says so; the other matrices take the type asked for.
TEST_F(GgufExport, WidthsNoBlockDividesAreWrittenAsF32) {
  RandomCheckpointShape s{.vocab = 64,
                          .hidden = 256,
                          .intermediate = 688,
                          .layers = 1,
                          .heads = 4,
                          .kv_heads = 2,
                          .head_dim = 64,
                          .loops = 2,
                          .max_positions = 64};
  const std::string odd = (dir_ / "odd").string(), out = file("odd.gguf");
  ASSERT_TRUE(write_random_checkpoint(odd, s, 3).ok());
  const io::GgufExportReport report = convert(odd, quant::GgmlType::kQ4_K, out);
  ASSERT_EQ(report.notes.size(), 1u);  // the 256-wide matrices take Q4_K; down (688): F32
  EXPECT_NE(report.notes[0].find("written as F32"), std::string::npos) << report.notes[0];
  auto gguf = io::GgufFile::open(out);
  ASSERT_TRUE(gguf.ok());
  EXPECT_EQ((*gguf)->find_tensor("blk.0.ffn_down.weight")->type, quant::GgmlType::kF32);
  EXPECT_EQ((*gguf)->find_tensor("blk.0.ffn_gate.weight")->type, quant::GgmlType::kQ4_K);
  EXPECT_TRUE(load_ouro_model(out).ok());
}

TEST_F(GgufExport, UnknownTypeIsNamed) {
  auto t = io::parse_gguf_export_type("q3_k");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("q8_0, q4_k, q6_k"), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace rlt::model
