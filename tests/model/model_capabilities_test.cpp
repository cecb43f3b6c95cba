// Model capabilities as data: what each architecture declares, and the engine settings refused
// with the reason and what to change.
#include "model/model_capabilities.h"

#include <gtest/gtest.h>

namespace rlt::model {
namespace {

io::ModelConfig config(io::Architecture a, int64_t loops, bool gate) {
  io::ModelConfig c;
  c.architecture = a;
  c.model_type = io::architecture_name(a);
  c.total_ut_steps = loops;
  c.exit_gate = gate;
  return c;
}

TEST(ModelCapabilities, EveryFeatureIsDeclaredInOrder) {
  const ModelCapabilities caps = model_capabilities(config(io::Architecture::kOuro, 4, true));
  ASSERT_EQ(caps.features.size(), 9u);
  for (size_t i = 0; i < caps.features.size(); ++i)
    EXPECT_EQ(static_cast<size_t>(caps.features[i].feature), i);
  for (const ModelCapability& f : caps.features)
    EXPECT_TRUE(f.supported) << feature_name(f.feature);
}

TEST(ModelCapabilities, WhatEachArchitectureLacks) {
  const auto nanbeige = model_capabilities(config(io::Architecture::kNanbeige, 2, false));
  EXPECT_EQ(nanbeige.architecture, "nanbeige");
  EXPECT_FALSE(nanbeige.supports(ModelFeature::kAdaptiveExit));
  EXPECT_NE(nanbeige.get(ModelFeature::kAdaptiveExit).why.find("runs all 2 loops"),
            std::string::npos);
  EXPECT_TRUE(nanbeige.supports(ModelFeature::kSpeculativeSelf)) << "two loops: drafts run one";
  const auto llama = model_capabilities(config(io::Architecture::kLlama, 1, false));
  EXPECT_FALSE(llama.supports(ModelFeature::kSpeculativeSelf));
  EXPECT_TRUE(llama.supports(ModelFeature::kSpeculativeNgram));
  const auto gateless_ouro = model_capabilities(config(io::Architecture::kOuro, 4, false));
  EXPECT_FALSE(gateless_ouro.supports(ModelFeature::kAdaptiveExit));
  EXPECT_NE(gateless_ouro.get(ModelFeature::kAdaptiveExit).why.find("no exit gate"),
            std::string::npos);
}

TEST(ModelCapabilities, HuginnRunsOnTheCpuWithLastExitedAndItsCriteria) {
  const auto huginn = model_capabilities(config(io::Architecture::kHuginn, 32, false));
  EXPECT_EQ(huginn.architecture, "huginn_raven");
  ASSERT_EQ(huginn.features.size(), 9u);
  for (ModelFeature f : {ModelFeature::kLastExitedLayout, ModelFeature::kAdaptiveExit})
    EXPECT_TRUE(huginn.supports(f)) << feature_name(f);
  for (ModelFeature f : {ModelFeature::kSharedLayout, ModelFeature::kPrefixCaching, ModelFeature::kAsyncScheduling,
                         ModelFeature::kSpeculativeNgram, ModelFeature::kSpeculativeSelf, ModelFeature::kGguf,
                         ModelFeature::kCuda}) {
    EXPECT_FALSE(huginn.supports(f)) << feature_name(f);
    EXPECT_FALSE(huginn.get(f).why.empty()) << feature_name(f);
  }
  EngineConfig c;
  EXPECT_TRUE(check_model_capabilities(huginn, c).ok());
  c.enable_prefix_caching = true;
  EXPECT_NE(check_model_capabilities(huginn, c).message().find("seeded noise"), std::string::npos);
  c.enable_prefix_caching = false;
  c.device = "cuda:0";
  EXPECT_NE(check_model_capabilities(huginn, c).message().find("use --device cpu"), std::string::npos);
}

TEST(ModelCapabilities, EngineSettingsTheModelLacksAreRefusedWithWhatToChange) {
  const auto llama = model_capabilities(config(io::Architecture::kLlama, 1, false));
  EngineConfig c;
  EXPECT_TRUE(check_model_capabilities(llama, c).ok());
  c.speculative.method = SpeculativeMethod::kSelf;
  const Status s = check_model_capabilities(llama, c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kUnimplemented);
  EXPECT_NE(s.message().find(
                "--speculative-method self: this llama model does not support speculative self"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("use --speculative-method ngram"), std::string::npos) << s.message();
  c.speculative.method = SpeculativeMethod::kNgram;
  c.kv_layout = KVLayout::kShared;
  c.enable_prefix_caching = true;
  EXPECT_TRUE(check_model_capabilities(llama, c).ok());
}

}  // namespace
}  // namespace rlt::model
