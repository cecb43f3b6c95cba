#include "io/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace rlt::io {
namespace {

nlohmann::json tiny_config() {
  return {{"architectures", {"OuroForCausalLM"}}, {"model_type", "ouro"}, {"vocab_size", 64},
          {"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8},
          {"hidden_act", "silu"}, {"max_position_embeddings", 128}, {"rms_norm_eps", 1e-6},
          {"rope_theta", 1e6}, {"rope_scaling", nullptr}, {"total_ut_steps", 4},
          {"tie_word_embeddings", false}, {"eos_token_id", 0}, {"bos_token_id", 0}};
}

Result<ModelConfig> parse(const nlohmann::json& j) { return parse_model_config(j.dump(), "config.json"); }

void expect_error(const nlohmann::json& j, const std::string& needle) {
  auto r = parse(j);
  ASSERT_FALSE(r.ok()) << "expected: " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}

TEST(ModelConfig, ParsesTinyConfig) {
  auto r = parse(tiny_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->num_kv_heads, 2);
  EXPECT_EQ(r->total_ut_steps, 4);
  EXPECT_EQ(r->eos_token_ids, std::vector<int64_t>{0});
}

TEST(ModelConfig, DerivesHeadDimAndKvHeads) {
  auto j = tiny_config();
  j.erase("head_dim");
  j.erase("num_key_value_heads");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->head_dim, 8);
  EXPECT_EQ(r->num_kv_heads, 4);
}

TEST(ModelConfig, RealOuroConfigHasTheKnownParameterCount) {
  const char* src = std::getenv("RLT_SOURCE_DIR");
  auto path = std::filesystem::path(src ? src : RLT_SOURCE_DIR) / ".." / "shared" / "fixtures" / "ouro-1.4b" / "config.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture " << path << " is absent (only CI has ../shared/fixtures)";
  auto r = load_model_config(path.string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->parameter_count(), 1434652673);
  EXPECT_EQ(r->kv_values_per_token_per_depth() * r->total_ut_steps * 2, 768 * 1024);  // bf16 last_exited
  ModelConfig deeper = *r;
  deeper.num_layers = 48;
  EXPECT_EQ(deeper.parameter_count(), 2667974657);  // Ouro-2.6B
}

TEST(ModelConfig, RefusesOtherModelTypes) {
  auto j = tiny_config();
  j["model_type"] = "qwen2";
  auto r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("field 'model_type' is \"qwen2\""), std::string::npos);
  EXPECT_NE(r.status().message().find("accepted: \"ouro\", \"llama\""), std::string::npos);
}

// meta-llama/Llama-3.2-1B's config.json (values as published).
nlohmann::json llama32_1b_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"attention_bias", false},
          {"attention_dropout", 0.0}, {"bos_token_id", 128000}, {"eos_token_id", 128001}, {"head_dim", 64},
          {"hidden_act", "silu"}, {"hidden_size", 2048}, {"initializer_range", 0.02}, {"intermediate_size", 8192},
          {"max_position_embeddings", 131072}, {"mlp_bias", false}, {"num_attention_heads", 32},
          {"num_hidden_layers", 16}, {"num_key_value_heads", 8}, {"pretraining_tp", 1}, {"rms_norm_eps", 1e-5},
          {"rope_scaling", {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                            {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}},
          {"rope_theta", 500000.0}, {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.45.0.dev0"}, {"use_cache", true}, {"vocab_size", 128256}};
}

TEST(ModelConfig, ParsesARealLlamaConfigAsTheOneLoopCase) {
  auto r = parse(llama32_1b_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, Architecture::kLlama);
  EXPECT_EQ(r->total_ut_steps, 1);
  EXPECT_FALSE(r->has_exit_gate());
  EXPECT_FALSE(r->sandwich_norms());
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_EQ(r->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_EQ(r->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(r->parameter_count(), 1235814400);  // the published 1.24B
}

TEST(ModelConfig, LlamaDefaultsAndRefusals) {
  auto j = llama32_1b_config();
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("tie_word_embeddings");
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope_theta, 10000.0);
  EXPECT_EQ(r->rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_FALSE(r->tie_word_embeddings);

  auto linear = llama32_1b_config();
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  auto l = parse(linear);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(l->rope_scaling.kind, RopeScaling::Kind::kLinear);
  EXPECT_EQ(l->rope_scaling.factor, 2.0);

  struct Case { const char* field; nlohmann::json value; const char* needle; };
  const Case cases[] = {
      {"attention_bias", true, "field 'attention_bias' is true"},
      {"mlp_bias", true, "field 'mlp_bias' is true"},
      {"pretraining_tp", 2, "field 'pretraining_tp' is 2"},
      {"architectures", {"MistralForCausalLM"}, "LlamaForCausalLM"},
      {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "field 'rope_scaling' is"},
      {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}, "rope_scaling: field 'low_freq_factor' is required"},
      {"total_ut_steps", 4, "unknown field 'total_ut_steps' for model_type llama"},
      {"hidden_act", "gelu", "field 'hidden_act' is \"gelu\""},
  };
  for (const auto& c : cases) {
    auto bad = llama32_1b_config();
    bad[c.field] = c.value;
    expect_error(bad, c.needle);
  }
}

TEST(ModelConfig, RefusesUnsupportedSemantics) {
  struct Case { const char* field; nlohmann::json value; const char* needle; };
  const Case cases[] = {
      {"architectures", {"LlamaForCausalLM"}, "field 'architectures'"},
      {"hidden_act", "gelu", "field 'hidden_act' is \"gelu\""},
      {"rope_scaling", {{"type", "linear"}}, "field 'rope_scaling'"},
      {"tie_word_embeddings", true, "field 'tie_word_embeddings' is true"},
      {"attention_dropout", 0.1, "field 'attention_dropout'"},
      {"use_sliding_window", true, "field 'use_sliding_window'"},
      {"sliding_window", 4096, "field 'sliding_window'"},
      {"layer_types", {"full_attention", "sliding_attention"}, "\"sliding_attention\""},
      {"layer_types", {"full_attention"}, "one entry per layer (2)"},
      {"num_key_value_heads", 3, "(3) must divide num_attention_heads (4)"},
      {"head_dim", 7, "must be even"},
      {"early_exit_threshold", 1.5, "must be in [0, 1]"},
      {"eos_token_id", 99, "99 is outside the vocabulary (64)"},
      {"eos_token_id", "x", "token id"},
      {"vocab_size", -5, "must be positive, got -5"},
      {"vocab_size", 1.5, "must be an integer"},
      {"rms_norm_eps", "tiny", "must be a number"},
      {"surprise", 1, "unknown field 'surprise'"},
  };
  for (const Case& c : cases) {
    auto j = tiny_config();
    j[c.field] = c.value;
    SCOPED_TRACE(c.field);
    expect_error(j, c.needle);
  }
}

TEST(ModelConfig, RequiresCoreFields) {
  for (const char* f : {"vocab_size", "hidden_size", "num_hidden_layers", "total_ut_steps", "rope_theta"}) {
    auto j = tiny_config();
    j.erase(f);
    SCOPED_TRACE(f);
    expect_error(j, std::string("field '") + f + "' is required");
  }
}

TEST(ModelConfig, RejectsInvalidJsonAndNonObjects) {
  EXPECT_NE(parse_model_config("{", "c.json").status().message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_model_config("[]", "c.json").status().message().find("expected a JSON object"), std::string::npos);
}

TEST(GenerationConfig, AcceptsOneOrManyEosIds) {
  auto one = parse_generation_config(R"({"eos_token_id": 2, "bos_token_id": 1})", "g.json");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->eos_token_ids, std::vector<int64_t>{2});
  auto many = parse_generation_config(R"({"eos_token_id": [0, 2]})", "g.json");
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->eos_token_ids, (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(parse_generation_config(R"({"eos_token_id": [-1]})", "g.json").ok());
  auto missing = load_generation_config("/nonexistent/generation_config.json");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->eos_token_ids.empty());
}

}  // namespace
}  // namespace rlt::io
