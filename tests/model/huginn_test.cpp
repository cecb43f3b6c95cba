// Huginn's pieces on their own: the seeded initial states, the exit criteria's worked values,
// the weight binding's checks of an export's optional tensors, and the dense reference's
// determinism. (Its forward pass is checked against the float64 oracle in
// tests/oracle/test_cpp_vs_oracle.py, the engine against the reference in engine_equivalence.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "common/half.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "model/demo_checkpoint.h"
#include "model/exit_criteria.h"
#include "model/exit_rule.h"
#include "model/initial_state.h"
#include "model/reference_model.h"

namespace rlt::model {
namespace {

namespace fs = std::filesystem;

TEST(HuginnInitialState, IsATruncatedNormalReproducibleFromSeedAndPosition) {
  const double std = std::sqrt(0.4);
  std::vector<float> a(20000), b(20000), c(20000);
  draw_initial_state(7, 3, std, a);
  draw_initial_state(7, 3, std, b);
  draw_initial_state(7, 4, std, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  draw_initial_state(8, 3, std, c);
  EXPECT_NE(a, c);
  double sum = 0, sq = 0;
  for (float x : a) {
    EXPECT_LE(std::abs(x), 3 * std + 1e-6);
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / a.size(), sd = std::sqrt(sq / a.size() - mean * mean);
  // A normal cut at ±3σ keeps σ·0.9866; 20,000 draws measure it within ~1 %.
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sd / std, 0.9866, 0.015);
  // A state is a prefix of a longer one: element i depends on (seed, position, i) only.
  std::vector<float> head(100);
  draw_initial_state(7, 3, std, head);
  EXPECT_TRUE(std::equal(head.begin(), head.end(), a.begin()));
}

TEST(HuginnExitCriteria, WorkedValues) {
  const std::vector<float> s0 = {1, 0}, s1 = {1, 1};
  CriterionState latent(ExitCriterion::kLatentDiff, 0.03, s0, 2);
  EXPECT_DOUBLE_EQ(latent.step(s1, {}), 1.0 / std::sqrt(2.0));  // |s1 - s0| / |s1|
  EXPECT_DOUBLE_EQ(latent.step(s1, {}), 0.0);
  EXPECT_TRUE(criterion_fires(ExitCriterion::kLatentDiff, 0.0, 0.03));

  // Uniform logits: KL from the uniform p_0 is 0; entropy ln 4 against H_0 = 100.
  const std::vector<float> flat = {0, 0, 0, 0}, peaked = {std::log(7.0f), 0, 0, 0};
  CriterionState kl(ExitCriterion::kKl, 5e-4, s0, 4);
  EXPECT_NEAR(kl.step(s0, flat), 0.0, 1e-15);
  const double p = 0.7, q = 0.1;  // softmax of `peaked`
  EXPECT_NEAR(kl.step(s0, peaked), 0.25 * std::log(0.25 / p) + 3 * 0.25 * std::log(0.25 / q), 1e-7);
  CriterionState entropy(ExitCriterion::kEntropyDiff, 1e-3, s0, 4);
  EXPECT_NEAR(entropy.step(s0, flat), 100 - std::log(4.0), 1e-8);
  // min-p masking: probabilities below 0.1·max become 1/V, then renormalized.
  CriterionState minp(ExitCriterion::kMinpKl, 1e-6, s0, 4);
  const std::vector<float> sharp = {std::log(100.0f), std::log(5.0f), 0, 0};  // p ∝ 100, 5, 1, 1
  const double m0 = 100.0 / 107, m1 = 0.25, m2 = 0.25;  // 5/107 and 1/107 < 0.1·max
  const double z = m0 + m1 + 2 * m2;
  const double want =
      0.25 * (std::log(0.25) - std::log(m0 / z)) + 3 * 0.25 * (std::log(0.25) - std::log(m2 / z));
  EXPECT_NEAR(minp.step(s0, sharp), want, 1e-6);
  CriterionState argmax(ExitCriterion::kArgmaxStability, 2, s0, 4);
  EXPECT_EQ(argmax.step(s0, peaked), 0.0);
  EXPECT_EQ(argmax.step(s0, sharp), 1.0);
  EXPECT_TRUE(argmax.check(s0, flat));  // the first index of a tie: the same argmax twice more
  EXPECT_EQ(argmax.last_value(), 2.0);
  EXPECT_TRUE(criterion_fires(ExitCriterion::kArgmaxStability, 2.0, 2));
  EXPECT_FALSE(criterion_fires(ExitCriterion::kNone, -1.0, 0));

  // The rule around a value: min_loops holds it back, max_loops ends the token.
  auto resolved =
      resolve_exit_params({.min_loops = 3, .max_loops = 6, .criterion = ExitCriterion::kKl}, 8);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(*resolved->criterion_threshold, 5e-4);
  EXPECT_FALSE(criterion_exit_step(*resolved, 2, 0.0));
  EXPECT_TRUE(criterion_exit_step(*resolved, 3, 0.0));
  EXPECT_FALSE(criterion_exit_step(*resolved, 5, 1.0));
  EXPECT_TRUE(criterion_exit_step(*resolved, 6, 1.0));
  EXPECT_FALSE(
      resolve_exit_params({.criterion = ExitCriterion::kKl, .criterion_threshold = -1.0}, 8).ok());
}

// huginn-tiny written once, and copies of it with extra tensors.
class HuginnCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("rlt_huginn_test_" + std::to_string(::getpid()));
    auto shape = random_checkpoint_preset("huginn-tiny");
    ASSERT_TRUE(shape.ok());
    shape_ = *shape;
    ASSERT_TRUE(write_random_checkpoint(dir_.string(), shape_, shape_.seed).ok());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A copy of the checkpoint with `extra` tensors added.
  static std::string with_tensors(const std::string& name, std::vector<io::TensorToWrite> extra) {
    const fs::path out = dir_.string() + "_" + name;
    fs::create_directories(out);
    for (const char* f :
         {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
      fs::copy_file(dir_ / f, out / f, fs::copy_options::overwrite_existing);
    auto ckpt = io::Checkpoint::open_dir(dir_.string());
    EXPECT_TRUE(ckpt.ok());
    std::vector<io::TensorToWrite> tensors;
    for (const auto& [n, t] : ckpt->tensors())
      tensors.push_back({n, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
    for (auto& t : extra) tensors.push_back(std::move(t));
    EXPECT_TRUE(
        io::write_safetensors((out / "model.safetensors").string(), std::move(tensors)).ok());
    return out.string();
  }

  static io::TensorToWrite rope_table(double base) {
    const int64_t positions = shape_.max_positions, half = shape_.head_dim / 2;
    io::TensorToWrite t{"freqs_cis", DType::kF32, {1, positions, 1, half, 2}, {}};
    t.bytes.resize(static_cast<size_t>(positions * half * 2 * 4));
    auto* v = reinterpret_cast<float*>(t.bytes.data());
    for (int64_t p = 0; p < positions; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * std::pow(base, -2.0 * i / shape_.head_dim);
        v[(p * half + i) * 2] = static_cast<float>(std::cos(angle));
        v[(p * half + i) * 2 + 1] = static_cast<float>(std::sin(angle));
      }
    }
    return t;
  }

  static io::TensorToWrite head(bool equal) {
    auto ckpt = io::Checkpoint::open_dir(dir_.string());
    const io::TensorView& wte = *ckpt->find("transformer.wte.weight");
    io::TensorToWrite t{"lm_head.weight", wte.dtype, wte.shape,
                        std::vector<uint8_t>(wte.data, wte.data + wte.nbytes)};
    if (!equal) t.bytes[100] ^= 0x40;
    return t;
  }

  static inline fs::path dir_;
  static inline RandomCheckpointShape shape_;
};

TEST_F(HuginnCheckpoint, ExportedHeadAndRopeTableAreCheckedNotUsed) {
  auto plain = load_ouro_model(dir_.string());
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ((*plain)->config.architecture, io::Architecture::kHuginn);
  auto full = load_ouro_model(with_tensors("full", {head(true), rope_table(5e4)}));
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  const std::vector<int32_t> prompt = {5, 80, 121};
  const ExitParams kl{.min_loops = 1, .criterion = ExitCriterion::kKl};
  auto a = ReferenceModel(*plain, KvSemantics::kLastExited, 3).generate(prompt, 6, kl, true);
  auto b = ReferenceModel(*full, KvSemantics::kLastExited, 3).generate(prompt, 6, kl, true);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->exit_depths, b->exit_depths);

  auto other_head = load_ouro_model(with_tensors("head", {head(false)}));
  ASSERT_FALSE(other_head.ok());
  EXPECT_NE(
      other_head.status().message().find("lm_head.weight differs from transformer.wte.weight"),
      std::string::npos)
      << other_head.status().to_string();
  auto other_base = load_ouro_model(with_tensors("rope", {rope_table(1e4)}));
  ASSERT_FALSE(other_base.ok());
  EXPECT_NE(
      other_base.status().message().find("freqs_cis does not match RoPE with rope_base 50000"),
      std::string::npos)
      << other_base.status().to_string();
}

TEST_F(HuginnCheckpoint, ASeedReproducesTheOutputAndAnotherSeedChangesIt) {
  auto model = load_ouro_model(dir_.string());
  ASSERT_TRUE(model.ok());
  const std::vector<int32_t> prompt = {40, 41, 42, 43};
  const ExitParams latent{.min_loops = 1, .criterion = ExitCriterion::kLatentDiff};
  auto a =
      ReferenceModel(*model, KvSemantics::kLastExited, 11).generate(prompt, 10, latent, true, true);
  auto b = ReferenceModel(*model, KvSemantics::kLastExited, 11).generate(prompt, 10, latent, true);
  auto c =
      ReferenceModel(*model, KvSemantics::kLastExited, 12).generate(prompt, 10, latent, true, true);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->exit_depths, b->exit_depths);
  EXPECT_NE(a->steps[1].logits, c->steps[1].logits) << "the initial state is the seed's";
  // Each decode step's trace holds the criterion's value after every step it ran.
  for (size_t n = 1; n < a->steps.size(); ++n)
    EXPECT_EQ(a->steps[n].trace.criterion_values.size(), static_cast<size_t>(a->exit_depths[n]));
  // The shared layout is not Huginn's; Ouro's gate criterion is not refused, Huginn's are for Ouro.
  EXPECT_FALSE(
      ReferenceModel(*model, KvSemantics::kShared, 11).generate(prompt, 2, latent, true).ok());
}

}  // namespace
}  // namespace rlt::model
