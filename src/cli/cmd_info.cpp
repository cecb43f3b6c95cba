// `rlt info`: what a model folder holds and what serving it costs, without running it.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_dir.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"
#include "model/ouro_weights.h"
#ifdef RLT_HAVE_CUDA
#include "cuda/device.h"
#endif

namespace rlt::cli {
namespace {

struct InfoOptions {
  std::string model;
  bool json = false;
};

std::string with_commas(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// What this build and machine offer on the GPU side, in one line.
std::string cuda_summary() {
#ifdef RLT_HAVE_CUDA
  const cuda::DeviceList list = cuda::list_devices();
  std::string devices;
  for (const auto& d : list.devices)
    devices += fmt::format("{}{} (sm_{}{})", devices.empty() ? "" : ", ", d.name, d.compute_major, d.compute_minor);
  return fmt::format("built for {}; devices: {}", cuda::compiled_architectures(),
                     devices.empty() ? "none (" + list.why_none + ")" : devices);
#else
  return "not built (configure with -DRLT_CUDA=ON and the CUDA toolkit)";
#endif
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt::format("{:.2f} {}", bytes, units[u]);
}

int run_info(const InfoOptions& opt) {
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  namespace fs = std::filesystem;
  auto config = io::load_model_config((fs::path(*dir) / "config.json").string());
  if (!config.ok()) return report_error(config.status());
  const io::ModelConfig& c = *config;

  // Weights are optional: a folder with only config.json still gets its sizes reported.
  std::string validation = "ok";
  bool weights_present = false, weights_ok = false, weights_broken = false;
  size_t weight_bytes = 0;
  std::string weight_dtype = "bf16";
  auto ckpt = io::Checkpoint::open_dir(*dir);
  if (ckpt.ok()) {
    weights_present = true;
    weight_bytes = ckpt->total_bytes();
    Status v = io::validate_tensor_set(*ckpt, model::ouro_expected_tensors(c));
    weights_ok = v.ok();
    if (!v.ok()) validation = v.to_string();
    if (auto* e = ckpt->find("model.embed_tokens.weight")) weight_dtype = std::string(dtype_name(e->dtype));
  } else if (ckpt.status().code() == ErrorCode::kNotFound) {
    validation = "config ok; no weights in this folder (model.safetensors or model.safetensors.index.json)";
  } else {
    weights_broken = true;  // files exist but cannot be read: as bad as a wrong tensor set
    validation = ckpt.status().to_string();
  }
  for (auto& ch : weight_dtype) ch = static_cast<char>(std::tolower(ch));
  const int64_t kv_elem_bytes = weight_dtype == "f32" ? 4 : 2;
  const int64_t plane_bytes = c.kv_values_per_token_per_depth() * kv_elem_bytes;
  const int64_t last_exited = plane_bytes * c.total_ut_steps;
  const int64_t shared = plane_bytes;
  const int64_t expected_weight_bytes = c.parameter_count() * (weight_dtype == "f32" ? 4 : 2);

  if (opt.json) {
    nlohmann::ordered_json j;
    j["model_dir"] = *dir;
    j["model_type"] = c.model_type;
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_layers"] = c.num_layers;
    j["num_heads"] = c.num_heads;
    j["num_kv_heads"] = c.num_kv_heads;
    j["head_dim"] = c.head_dim;
    j["total_ut_steps"] = c.total_ut_steps;
    j["exit_gate"] = c.has_exit_gate();
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["rope_theta"] = c.rope_theta;
    j["rms_norm_eps"] = c.rms_norm_eps;
    j["eos_token_ids"] = c.eos_token_ids;
    j["parameters"] = c.parameter_count();
    j["weights_present"] = weights_present;
    j["weight_dtype"] = weight_dtype;
    j["weight_bytes"] = weights_present ? static_cast<int64_t>(weight_bytes) : expected_weight_bytes;
    j["kv_bytes_per_token"] = {{"last_exited", last_exited}, {"shared", shared}, {"dtype", weight_dtype}};
    j["cpu_dispatch_target"] = kernels::cpu_dispatch_target();
    j["cpu_bf16_dot_products"] = kernels::bf16_dot_supported();
    j["cuda"] = cuda_summary();
    j["valid"] = !weights_broken && (!weights_present || weights_ok);
    j["validation"] = validation;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("model          {} ({})\n", *dir, c.model_type);
    std::cout << fmt::format("shape          {} layers x {} loops, hidden {}, intermediate {}, vocab {}{}{}\n",
                             c.num_layers, c.total_ut_steps, c.hidden_size, c.intermediate_size, c.vocab_size,
                             c.has_exit_gate() ? ", exit gate" : "", c.tie_word_embeddings ? ", tied lm head" : "");
    std::cout << fmt::format("attention      {} query heads, {} kv heads, head_dim {}, rope theta {}, max positions {}\n",
                             c.num_heads, c.num_kv_heads, c.head_dim, c.rope_theta, c.max_position_embeddings);
    std::cout << fmt::format("parameters     {}\n", with_commas(c.parameter_count()));
    std::cout << fmt::format("weights        {} ({}){}\n",
                             human_bytes(static_cast<double>(weights_present ? weight_bytes : expected_weight_bytes)),
                             weight_dtype, weights_present ? "" : "; expected size, no weight files present");
    std::cout << fmt::format("kv per token   last_exited {} ({} planes), shared {} (1 plane), {}\n",
                             human_bytes(static_cast<double>(last_exited)), c.total_ut_steps,
                             human_bytes(static_cast<double>(shared)), weight_dtype);
    std::cout << fmt::format("eos ids        {}\n", fmt::join(c.eos_token_ids, ", "));
    std::cout << fmt::format("cpu kernels    {} (Highway dynamic dispatch); AVX512_BF16 dot products {}\n",
                             kernels::cpu_dispatch_target(),
                             kernels::bf16_dot_supported() ? "available (--activation-dtype bf16)" : "not available");
    std::cout << fmt::format("cuda           {}\n", cuda_summary());
    std::cout << fmt::format("validation     {}\n", validation);
  }
  return weights_broken || (weights_present && !weights_ok) ? 1 : 0;
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Describe a model folder: shape, parameters, weight and KV sizes, validation");
  cmd->add_option("--model", opt->model, "Hugging Face model folder (default: the embedded demo model)");
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, exit_code] { *exit_code = run_info(*opt); });
}

}  // namespace rlt::cli
