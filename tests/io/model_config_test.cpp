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
  j["model_type"] = "llama";
  auto r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("field 'model_type' is \"llama\""), std::string::npos);
  EXPECT_NE(r.status().message().find("accepted: \"ouro\""), std::string::npos);
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
