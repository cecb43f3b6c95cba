// `rlt attention explain`: the attention backend selection as a dry run. Reads only the config
// (no weights), evaluates every candidate for the given or simulated device, prints the report.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>

#include "attention/selection.h"
#include "cli/attention_flags.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "source/model_source.h"
#include "io/model_config.h"

namespace rlt::cli {
namespace {

struct ExplainOptions {
  std::string model;
  AttentionFlags attention;
  std::string assume_device;
  std::string kv_dtype;  // "" = from the model's torch_dtype
  bool assume_cuda_build = false;
  bool json = false;
};

Result<DType> kv_dtype_for(const io::ModelConfig& c, const std::string& flag) {
  const std::string name = flag.empty() ? c.torch_dtype : flag;
  if (name.empty() || name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float16" || name == "f16") return DType::kF16;
  if (name == "float32" || name == "f32") return DType::kF32;
  if (name == "q8_0") return DType::kQ8_0;
  return invalid_argument(
      fmt::format("unknown K/V dtype '{}' (accepted: bf16, f16, f32, q8_0)", name));
}

int run_explain(const ExplainOptions& opt) {
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  auto src = source::ModelSource::open(*dir);
  if (!src.ok()) return report_error(src.status());
  const io::ModelConfig* config = &src->config();
  auto dtype = kv_dtype_for(*config, opt.kv_dtype);
  if (!dtype.ok()) return report_error(dtype.status());
  attention::SelectionInput in;
  if (opt.assume_device.empty()) {
    in.device = attention::detect_host_cpu();
  } else {
    auto device = attention::parse_device(opt.assume_device);
    if (!device.ok()) return report_error(device.status().with_context("--assume-device"));
    in.device = *device;
  }
  if (opt.assume_cuda_build) {  // what a CUDA build with cuDNN installed would decide
    in.is_built = [](const attention::BackendEntry&) { return true; };
    in.library_loads = [](const std::string&) { return true; };
  }
  in.requested = opt.attention.backend;
  in.kv_dtype = *dtype;
  in.head_dim = static_cast<int32_t>(config->head_dim);
  in.num_q_heads = static_cast<int32_t>(config->num_heads);
  in.num_kv_heads = static_cast<int32_t>(config->num_kv_heads);
  in.page_size = opt.attention.block_size;
  in.requirements = opt.attention.requirements();
  const attention::SelectionReport report = attention::select_attention_backend(in);
  if (opt.json) {
    std::cout << report.to_json() << "\n";
  } else {
    std::cout << fmt::format("model: {} (head_dim {}, {} query / {} kv heads, K/V {}, pages of {} tokens)\n", *dir,
                             in.head_dim, in.num_q_heads, in.num_kv_heads, dtype_name(in.kv_dtype), in.page_size);
    std::cout << report.to_text();
    if (!report.status.ok()) std::cout << "error: " << report.status.message() << "\n";
  }
  return report.status.ok() ? 0 : 1;
}

}  // namespace

void add_attention_command(CLI::App& app, int* exit_code) {
  CLI::App* group = app.add_subcommand("attention", "Attention backends");
  group->require_subcommand(1);
  auto opt = std::make_shared<ExplainOptions>();
  CLI::App* cmd = group->add_subcommand(
      "explain", "Dry run of attention backend selection: every candidate's verdict and reason (loads no weights)");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  add_attention_flags(*cmd, opt->attention);
  cmd->add_option("--assume-device", opt->assume_device,
                  "Simulate a device: cpu:<scalar|sse4|avx2|avx512|neon> or cuda:sm_<NN> (default: this machine)");
  cmd->add_option("--kv-dtype", opt->kv_dtype,
                  "K/V cache dtype: bf16, f16, f32 or q8_0 (default: the model's dtype)");
  cmd->add_flag("--assume-cuda-build", opt->assume_cuda_build,
                "Simulate a build with every backend compiled in and every library loadable");
  cmd->add_flag("--json", opt->json, "Print the report as JSON");
  cmd->callback([opt, exit_code] { *exit_code = run_explain(*opt); });
}

}  // namespace rlt::cli
