#include "io/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
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
  EXPECT_NE(r.status().message().find("accepted: \"ouro\", \"llama\", \"nanbeige\""), std::string::npos);
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

// Nanbeige/Nanbeige4.2-3B's config.json (the released values; auto_map points at its remote code).
nlohmann::json nanbeige42_config() {
  return {{"architectures", {"NanbeigeForCausalLM"}},
          {"auto_map", {{"AutoConfig", "configuration_nanbeige.NanbeigeConfig"},
                        {"AutoModelForCausalLM", "modeling_nanbeige.NanbeigeForCausalLM"}}},
          {"model_type", "nanbeige"}, {"vocab_size", 166144}, {"hidden_size", 3072},
          {"intermediate_size", 10752}, {"num_hidden_layers", 22}, {"num_attention_heads", 48},
          {"num_key_value_heads", 8}, {"head_dim", 128}, {"kv_channels", 128}, {"hidden_act", "silu"},
          {"max_position_embeddings", 262144}, {"rope_theta", 70000000}, {"rope_scaling", nullptr},
          {"attention_bias", false}, {"attention_dropout", 0.0}, {"rms_norm_eps", 1e-5}, {"num_loops", 2},
          {"loop_loss_weights", nlohmann::json::array()}, {"skip_loop_final_norm", false},
          {"pretraining_tp", 1}, {"tie_word_embeddings", false}, {"pad_token_id", 0},
          {"bos_token_id", 166100}, {"eos_token_id", 166101}, {"torch_dtype", "bfloat16"}};
}

TEST(ModelConfig, ParsesTheNanbeigeConfigAsALoopedLlama) {
  auto r = parse(nanbeige42_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, Architecture::kNanbeige);
  EXPECT_STREQ(architecture_name(r->architecture), "nanbeige");
  EXPECT_EQ(r->total_ut_steps, 2);
  EXPECT_FALSE(r->has_exit_gate());
  EXPECT_FALSE(r->sandwich_norms());
  EXPECT_EQ(r->q_dim(), 6144);
  EXPECT_EQ(r->kv_dim(), 1024);
  EXPECT_EQ(r->rope_theta, 7e7);
  EXPECT_EQ(r->rms_norm_eps, 1e-5);
  EXPECT_EQ(r->eos_token_ids, std::vector<int64_t>{166101});
  // 22 layers of (q 3072x6144, k/v 3072x1024, o 6144x3072, 3 x 3072x10752, 2 norms), embedding and
  // untied head 166144x3072, final norm.
  const int64_t layer = 3072 * 6144 * 2 + 3072 * 1024 * 2 + 3 * 3072 * 10752 + 2 * 3072;
  EXPECT_EQ(r->parameter_count(), 22 * layer + 2 * 166144LL * 3072 + 3072);

  // vllm-rlt's spelling of the loop count, alone or beside num_loops (they must agree).
  auto j = nanbeige42_config();
  j["total_ut_steps"] = 2;
  EXPECT_TRUE(parse(j).ok());
  j.erase("num_loops");
  ASSERT_TRUE(parse(j).ok());
  EXPECT_EQ(parse(j)->total_ut_steps, 2);
  j["num_loops"] = 3;
  expect_error(j, "disagrees with num_loops");
  j.erase("num_loops");
  j.erase("total_ut_steps");
  expect_error(j, "field 'num_loops' is required");
  // head_dim from kv_channels when absent; a kv_channels other than head_dim is refused.
  j = nanbeige42_config();
  j.erase("head_dim");
  ASSERT_TRUE(parse(j).ok());
  EXPECT_EQ(parse(j)->head_dim, 128);
  j = nanbeige42_config();
  j["kv_channels"] = 64;
  expect_error(j, "field 'kv_channels' (64) must equal head_dim (128)");
}

TEST(ModelConfig, NanbeigeRefusals) {
  auto j = nanbeige42_config();
  j["skip_loop_final_norm"] = true;
  expect_error(j, "field 'skip_loop_final_norm' is true, which rlt does not support");
  j = nanbeige42_config();
  j["architectures"] = {"LlamaForCausalLM"};
  expect_error(j, "[\"NanbeigeForCausalLM\"]");
  j = nanbeige42_config();
  j["mlp_bias"] = true;
  expect_error(j, "field 'mlp_bias' is true");
  j = nanbeige42_config();
  j.erase("rms_norm_eps");
  expect_error(j, "field 'rms_norm_eps' is required");
  j = nanbeige42_config();
  j["enable_double_loop_split"] = true;  // an option of the remote code rlt does not implement
  expect_error(j, "unknown field 'enable_double_loop_split' for model_type nanbeige");
  j = nanbeige42_config();
  j["num_loops"] = 0;
  expect_error(j, "field 'num_loops' must be positive");
}

// Huginn-0125's config.json as released (seal-rg/recurrent-pretraining's raven_config_minimal.json:
// num_attention_heads, not n_heads; no rope_base, init_values or padded_vocab_size), plus the ids
// a tokenizer-aware export adds.
nlohmann::json huginn_config() {
  return nlohmann::json::parse(R"({
    "name": "nebel-raven-3.5b", "architectures": ["RavenForCausalLM"],
    "auto_map": {"AutoConfig": "raven_config_minimal.RavenConfig",
                 "AutoModelForCausalLM": "raven_modeling_minimal.RavenForCausalLM"},
    "torch_dtype": "bfloat16", "transformers_version": "4.28.1",
    "hf_config": {"org": "tomg-group-umd", "name": "nebel-raven-3.5b"},
    "model_type": "huginn_raven", "block_size": 4096, "vocab_size": 65536, "padding_multiple": 4096,
    "tie_embeddings": true, "num_attention_heads": 55, "num_key_value_heads": 55, "n_embd": 5280,
    "intermediate_size": 17920, "bias": false, "architecture_class_name": "RecurrentGPT",
    "block_class_name": "SandwichBlock", "norm_class_name": "RMSNorm_llama", "norm_eps": 0.000001,
    "mlp_class_name": "GatedMLP", "nonlin_name": "SiLU", "init_strategy": "takase", "init_orthogonal": false,
    "state_init": "like-init", "injection_type": "linear", "n_layers_in_recurrent_block": 4,
    "mean_recurrence": 32, "sampling_scheme": "poisson-lognormal-filling", "mean_backprop_depth": 8,
    "n_layers_in_prelude": 2, "n_layers_in_coda": 2, "qk_bias": true,
    "activation_checkpoint_impl": "per-iteration",
    "bos_token_id": 65504, "eos_token_id": 65505, "pad_token_id": 65509})");
}

// What RavenConfig.save_pretrained adds: the derived fields.
nlohmann::json huginn_saved_config() {
  nlohmann::json j = huginn_config();
  const double std = std::sqrt(2.0 / (5.0 * 5280));
  j["n_heads"] = 55;
  j["n_layers"] = 8;
  j["head_dim"] = 96;
  j["padded_vocab_size"] = 65536;
  j["rope_base"] = 50000;
  j["test_time_noise"] = 0;
  j["test_time_noise_type"] = "fixed";
  j["effective_expected_depth"] = 132;
  j["tie_word_embeddings"] = true;
  j["init_values"] = {{"std", std}, {"out_proj", std / std::sqrt(2.0 * 132)}, {"embedding", std},
                      {"embed_scale", std::sqrt(5280.0)}};
  return j;
}

TEST(ModelConfig, ParsesTheHuginnConfig) {
  auto saved = parse(huginn_saved_config());
  ASSERT_TRUE(saved.ok()) << saved.status().to_string();
  auto r = parse(huginn_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(saved->parameter_count(), r->parameter_count());
  EXPECT_EQ(saved->initial_state_std, r->initial_state_std);
  EXPECT_EQ(r->architecture, Architecture::kHuginn);
  EXPECT_STREQ(architecture_name(r->architecture), "huginn_raven");
  EXPECT_EQ(r->hidden_size, 5280);
  EXPECT_EQ(r->head_dim, 96);
  EXPECT_EQ(r->num_kv_heads, 55);
  EXPECT_EQ(r->prelude_layers, 2);
  EXPECT_EQ(r->num_layers, 4);
  EXPECT_EQ(r->coda_layers, 2);
  EXPECT_EQ(r->total_ut_steps, 32);
  EXPECT_EQ(r->max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(r->rope_theta, 50000.0);
  EXPECT_NEAR(r->embedding_scale, 72.6636, 1e-4);
  EXPECT_NEAR(r->initial_state_std, std::sqrt(0.4), 1e-12);
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_FALSE(r->has_exit_gate());
  EXPECT_TRUE(r->recurrent_injection());
  EXPECT_EQ(r->eos_token_ids, std::vector<int64_t>{65505});
  // The tensors' elements: the tied embedding, 8 blocks (Wqkv, proj, fc, mlp.proj, 4 norms, the
  // q/k bias), the adapter and ln_f.
  const int64_t h = 5280, inter = 17920;
  EXPECT_EQ(r->parameter_count(), 65536 * h + 8 * (4 * h * h + 3 * h * inter + 4 * h + 2 * h) + 2 * h * h + h);
}

TEST(ModelConfig, HuginnDefaultsAndRefusals) {
  auto j = huginn_saved_config();
  for (const char* f : {"rope_base", "norm_eps", "block_size", "init_values", "n_layers", "padded_vocab_size"}) j.erase(f);
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->rope_theta, 50000.0);
  EXPECT_DOUBLE_EQ(r->rms_norm_eps, 1e-6);
  EXPECT_NEAR(r->initial_state_std, std::sqrt(0.4), 1e-12);

  struct Case {
    const char* field;
    nlohmann::json value;
    const char* needle;
  };
  const Case cases[] = {
      {"qk_bias", false, "'qk_bias' is false"},
      {"bias", true, "no other projection biases"},
      {"tie_embeddings", false, "the head is the embedding"},
      {"injection_type", "add", "concat[state, prelude output]"},
      {"state_init", "zero", "truncated normal"},
      {"test_time_noise", 1, "no noise"},
      {"num_key_value_heads", 5, "no GQA"},
      {"n_layers", 9, "prelude, recurrent and coda blocks together (8)"},
      {"n_heads", 64, "disagrees with n_heads"},
      {"head_dim", 64, "must be n_embd / n_heads (96)"},
      {"block_class_name", "PreNormBlock", "norms on the residual sums"},
      {"mlp_class_name", "MLP", "GatedMLP"},
      {"nonlin_name", "GELU", "'nonlin_name'"},
      {"tie_word_embeddings", false, "the head is the embedding"},
      {"mean_recurrence", 0, "'mean_recurrence' must be positive"},
      {"n_layers_in_coda", nullptr, "'n_layers_in_coda' must be an integer"},
      {"vocab_size", 70000, "exceeds padded_vocab_size"},
      {"init_values", {{"std", -1}}, "'std' must be positive"},
      {"recurrent_norm", true, "unknown field 'recurrent_norm'"},
  };
  for (const Case& c : cases) {
    auto bad = huginn_saved_config();
    bad[c.field] = c.value;
    expect_error(bad, c.needle);
  }
  auto missing = huginn_config();
  missing.erase("n_layers_in_prelude");
  expect_error(missing, "'n_layers_in_prelude' is required");
  auto headless = huginn_config();
  headless.erase("num_attention_heads");
  expect_error(headless, "'n_heads' is required (or num_attention_heads)");
  auto odd = huginn_config();
  odd["num_attention_heads"] = odd["num_key_value_heads"] = 64;
  expect_error(odd, "must be a multiple of n_heads");
  auto huge = huginn_config();
  huge["mean_recurrence"] = 100000;
  expect_error(huge, "mean_recurrence = 100000 is larger than any model");
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

// SmolLM2-135M-Instruct's config.json as transformers 5 saves it: every PretrainedConfig field
// written out, RoPE in rope_parameters, dtype instead of torch_dtype.
nlohmann::json smollm2_transformers5_config() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
          {"bos_token_id", 1}, {"chunk_size_feed_forward", 0}, {"dtype", "bfloat16"}, {"eos_token_id", 2},
          {"head_dim", 64}, {"hidden_act", "silu"}, {"hidden_size", 576},
          {"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}}}, {"initializer_range", 0.041666666666666664},
          {"intermediate_size", 1536}, {"is_encoder_decoder", false}, {"label2id", {{"LABEL_0", 0}, {"LABEL_1", 1}}},
          {"max_position_embeddings", 8192}, {"mlp_bias", false}, {"model_type", "llama"},
          {"_name_or_path", "HuggingFaceTB/SmolLM2-135M-Instruct"}, {"num_attention_heads", 9},
          {"num_hidden_layers", 30}, {"num_key_value_heads", 3}, {"output_attentions", false},
          {"output_hidden_states", false}, {"pad_token_id", 2}, {"pretraining_tp", 1}, {"problem_type", nullptr},
          {"return_dict", true}, {"rms_norm_eps", 1e-5},
          {"rope_parameters", {{"rope_theta", 100000.0}, {"rope_type", "default"}}}, {"tie_word_embeddings", true},
          {"transformers_version", "5.24.0"}, {"unk_token_id", 0}, {"use_cache", true}, {"vocab_size", 49152}};
}

TEST(ModelConfig, ReadsTransformers5ConfigsWithRopeParameters) {
  auto r = parse(smollm2_transformers5_config());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->rope_theta, 100000.0);
  EXPECT_EQ(r->rope_scaling.kind, RopeScaling::Kind::kNone);
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_EQ(r->torch_dtype, "bfloat16");
  EXPECT_EQ(r->num_kv_heads, 3);

  // The same model as transformers 4 writes it: rope_theta at the top level.
  auto v4 = smollm2_transformers5_config();
  v4.erase("rope_parameters");
  v4["rope_theta"] = 100000.0;
  v4["torch_dtype"] = "bfloat16";
  v4.erase("dtype");
  auto r4 = parse(v4);
  ASSERT_TRUE(r4.ok()) << r4.status().to_string();
  EXPECT_EQ(r4->rope_theta, r->rope_theta);
  EXPECT_EQ(r4->parameter_count(), r->parameter_count());

  // Both spellings present and agreeing is fine; disagreeing is an error naming both values.
  auto both = smollm2_transformers5_config();
  both["rope_theta"] = 100000.0;
  EXPECT_TRUE(parse(both).ok());
  both["rope_theta"] = 10000.0;
  expect_error(both, "rope_parameters' has rope_theta 100000 but the top-level rope_theta is 10000");

  // Scaling inside rope_parameters reads exactly like rope_scaling.
  auto scaled = llama32_1b_config();
  nlohmann::json params = scaled["rope_scaling"];
  params["rope_theta"] = 500000.0;
  scaled.erase("rope_scaling");
  scaled.erase("rope_theta");
  scaled["rope_parameters"] = params;
  auto s5 = parse(scaled);
  ASSERT_TRUE(s5.ok()) << s5.status().to_string();
  auto s4 = parse(llama32_1b_config());
  EXPECT_EQ(s5->rope_theta, s4->rope_theta);
  EXPECT_EQ(s5->rope_scaling.kind, RopeScaling::Kind::kLlama3);
  EXPECT_EQ(s5->rope_scaling.factor, s4->rope_scaling.factor);
  EXPECT_EQ(s5->rope_scaling.original_max_position_embeddings, 8192);
  auto clash = scaled;
  clash["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  expect_error(clash, "rope_parameters' disagrees with rope_scaling");
  auto missing = smollm2_transformers5_config();
  missing["model_type"] = "ouro";
  missing["architectures"] = {"OuroForCausalLM"};
  missing["total_ut_steps"] = 4;
  missing["tie_word_embeddings"] = false;
  for (const char* llama_only : {"attention_bias", "mlp_bias", "pretraining_tp"}) missing.erase(llama_only);
  missing["rope_parameters"] = {{"rope_type", "default"}};
  expect_error(missing, "field 'rope_theta' is required (top level, or inside rope_parameters)");
  missing["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  auto ouro = parse(missing);
  ASSERT_TRUE(ouro.ok()) << ouro.status().to_string();
  EXPECT_EQ(ouro->rope_theta, 1e6);
  missing["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e6}};
  expect_error(missing, "field 'rope_parameters' is");
}

TEST(ModelConfig, GenericFieldsAreToleratedAndUnknownOnesReportedTogether) {
  // Fields transformers 4.x configs carry besides the model's own.
  auto j = llama32_1b_config();
  for (const char* f : {"output_scores", "return_dict_in_generate", "torchscript", "use_bfloat16", "is_decoder",
                        "do_sample", "tf_legacy_loss"})
    j[f] = false;
  j["temperature"] = 1.0;
  j["bad_words_ids"] = nullptr;
  j["num_beams"] = 1;
  j["_commit_hash"] = "abc";
  j["pruned_heads"] = nlohmann::json::object();
  j["cross_attention_hidden_size"] = nullptr;
  auto r = parse(j);
  ASSERT_TRUE(r.ok()) << r.status().to_string();

  auto unknown = smollm2_transformers5_config();
  unknown["whatever"] = 1;
  unknown["novel_attention"] = true;
  auto u = parse(unknown);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("unknown fields 'novel_attention', 'whatever' for model_type llama"),
            std::string::npos) << u.status().to_string();

  struct Case { const char* field; nlohmann::json value; const char* needle; };
  const Case cases[] = {
      {"is_encoder_decoder", true, "field 'is_encoder_decoder' is true"},
      {"add_cross_attention", true, "field 'add_cross_attention' is true"},
      {"pruned_heads", {{"0", {1}}}, "field 'pruned_heads'"},
      {"rope_parameters", "x", "field 'rope_parameters' must be an object"},
      {"rope_scaling", {{"factor", 8.0}}, "field 'rope_scaling' is"},  // no type: not silently default
  };
  for (const auto& c : cases) {
    auto bad = smollm2_transformers5_config();
    bad[c.field] = c.value;
    SCOPED_TRACE(c.field);
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
