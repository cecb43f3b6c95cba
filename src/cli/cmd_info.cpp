// `rlt info`: what a model folder or GGUF file holds and what serving it costs, without running it.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "io/gguf_model.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_bf16.h"
#include "kernels/cpu/linear_quant_int8.h"
#include "model/loop_program.h"
#include "model/model_capabilities.h"
#include "model/ouro_weights.h"
#include "source/model_source.h"
#ifdef RLT_HAVE_CUDA
#include "cuda/device.h"
#endif

namespace rlt::cli {
namespace {

struct InfoOptions {
  std::string model;
  WeightDType dtype = WeightDType::kAuto;
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
    devices += fmt::format("{}{} (sm_{}{})", devices.empty() ? "" : ", ", d.name, d.compute_major,
                           d.compute_minor);
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

// What a source's weights hold, checked against its config without loading them.
struct WeightReport {
  bool present = false, ok = false, broken = false;
  std::string validation = "ok";
  size_t bytes = 0;               // as loaded (GGUF: after dequantization)
  size_t file_bytes = 0;          // as stored
  std::string dtype = "bf16";     // of the embedding
  std::string kv_dtype = "bf16";  // the K/V cache's auto dtype
  std::string held_as;            // how the matrices are held: "bf16", or "Q4_1, Q8_0 blocks"
  std::vector<io::GgufTypeCount> types;  // GGUF: stored tensors by type
};

WeightReport check_weights(const source::ModelSource& src,
                           const io::QuantizedTensors& quantized_to) {
  WeightReport w;
  const io::ModelConfig& c = src.config();
  Result<io::Checkpoint> ckpt = internal_error("unset");
  if (src.gguf()) {
    w.types = io::gguf_type_summary(*src.gguf());
    for (const auto& t : w.types) w.file_bytes += static_cast<size_t>(t.bytes);
    auto plan = io::gguf_tensor_plan(*src.gguf(), c, quantized_to);
    ckpt = plan.ok() ? io::Checkpoint::from_views(std::move(plan).value(), {}, {src.path()})
                     : Result<io::Checkpoint>(plan.status());
  } else {
    ckpt = io::Checkpoint::open_dir(src.path());
  }
  if (ckpt.ok()) {
    w.present = true;
    w.bytes = ckpt->total_bytes();
    if (w.file_bytes == 0) w.file_bytes = w.bytes;
    Status v = io::validate_tensor_set(*ckpt, model::expected_tensors(c, *ckpt));
    w.ok = v.ok();
    if (!v.ok()) w.validation = v.to_string();
    if (auto* e = ckpt->find("model.embed_tokens.weight"))
      w.dtype = std::string(e->quant ? quant::ggml_type_name(*e->quant) : dtype_name(e->dtype));
    w.held_as = io::quantized_types(*ckpt);
    if (!w.held_as.empty()) w.held_as += " blocks";
  } else if (ckpt.status().code() == ErrorCode::kNotFound && !src.gguf()) {
    w.validation =
        "config ok; no weights in this folder (model.safetensors or model.safetensors.index.json)";
  } else {
    w.broken = true;  // files exist but cannot be read: as bad as a wrong tensor set
    w.validation = ckpt.status().to_string();
  }
  for (auto& ch : w.dtype) ch = static_cast<char>(std::tolower(ch));
  // Quantized weights get a bf16 cache; float weights a cache of their type.
  if (w.dtype == "f32" || w.dtype == "f16") w.kv_dtype = w.dtype;
  if (w.held_as.empty()) w.held_as = w.dtype;
  return w;
}

// The tokenizer and chat template in one line.
std::string tokenizer_summary(const source::ModelSource& src) {
  if (!src.has_tokenizer()) return "none (give --prompt-ids; the server needs one)";
  auto t = src.tokenizer();
  if (!t.ok()) return "broken: " + t.status().message();
  std::string kind = src.gguf() ? "from the GGUF metadata" : "tokenizer.json";
  if (src.gguf()) {
    auto model = src.gguf()->get_string("tokenizer.ggml.model");
    auto pre = src.gguf()->get_string("tokenizer.ggml.pre");
    if (model.ok() && *model) kind += fmt::format(" ({}", **model);
    if (pre.ok() && *pre) kind += fmt::format(", pre {}", **pre);
    if (model.ok() && *model) kind += ")";
  }
  auto tmpl = src.chat_template();
  return fmt::format("{}, {} tokens; chat template {}", kind, (*t)->vocab_size(),
                     tmpl.ok() ? "present" : "absent");
}

int run_info(const InfoOptions& opt) {
  auto path = resolve_model_dir(opt.model);
  if (!path.ok()) return report_error(path.status());
  const io::QuantizedTensors quantized_to = model::quantized_tensors(opt.dtype);
  auto src = source::ModelSource::open(*path);
  if (!src.ok()) return report_error(src.status());
  const io::ModelConfig& c = src->config();
  // Weights are optional: a folder with only config.json still gets its sizes reported.
  const WeightReport w = check_weights(*src, quantized_to);
  const int64_t kv_elem_bytes = w.kv_dtype == "f32" ? 4 : 2;
  const int64_t plane_bytes = c.kv_values_per_token_per_depth() * kv_elem_bytes;
  // Huginn's prelude and coda blocks keep their K/V in outer planes beside the loop planes.
  const int64_t outer_planes = c.recurrent_injection() ? model::outer_kv_planes(c) : 0;
  const int64_t last_exited = plane_bytes * (c.total_ut_steps + outer_planes);
  const int64_t shared = plane_bytes * (1 + outer_planes);
  const int64_t expected_weight_bytes = c.parameter_count() * (w.dtype == "f32" ? 4 : 2);
  const model::ModelCapabilities caps = model::model_capabilities(c);

  if (opt.json) {
    nlohmann::ordered_json j;
    j["model"] = *path;
    j["format"] = src->format_name();
    j["model_type"] = c.model_type;
    j["vocab_size"] = c.vocab_size;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_layers"] = c.num_layers;
    if (c.outer_layers() > 0) {
      j["prelude_layers"] = c.prelude_layers;
      j["coda_layers"] = c.coda_layers;
    }
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
    nlohmann::ordered_json features = nlohmann::ordered_json::object();
    for (const model::ModelCapability& f : caps.features)
      features[model::feature_name(f.feature)] = {{"supported", f.supported}, {"why", f.why}};
    j["capabilities"] = features;
    j["notes"] = src->notes();
    j["weights_present"] = w.present;
    j["weight_dtype"] = w.dtype;
    j["weight_bytes"] = w.present ? static_cast<int64_t>(w.bytes) : expected_weight_bytes;
    j["stored_weight_bytes"] =
        w.present ? static_cast<int64_t>(w.file_bytes) : expected_weight_bytes;
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (const auto& t : w.types)
      types.push_back({{"type", t.type}, {"tensors", t.tensors}, {"bytes", t.bytes}});
    j["tensor_types"] = types;
    j["tokenizer"] = tokenizer_summary(*src);
    j["kv_bytes_per_token"] = {
        {"last_exited", last_exited}, {"shared", shared}, {"dtype", w.kv_dtype}};
    j["cpu_dispatch_target"] = kernels::cpu_dispatch_target();
    j["cpu_bf16_dot_products"] = kernels::bf16_dot_supported();
    j["cpu_int8_dot_products"] = kernels::linear_quant_int8_supported();
    j["cpu_int8_kernel"] = kernels::linear_quant_int8_kernel();
    j["cuda"] = cuda_summary();
    j["valid"] = !w.broken && (!w.present || w.ok);
    j["validation"] = w.validation;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("model          {} ({}, {})\n", *path, c.model_type,
                             src->format_name());
    const std::string outer =
        c.outer_layers() > 0 ? fmt::format(" between {} prelude and {} coda", c.prelude_layers, c.coda_layers) : "";
    std::cout << fmt::format(
        "shape          {} layers x {} loops{}, hidden {}, intermediate {}, vocab {}{}{}\n",
        c.num_layers, c.total_ut_steps, outer, c.hidden_size, c.intermediate_size, c.vocab_size,
        c.has_exit_gate() ? ", exit gate" : "", c.tie_word_embeddings ? ", tied lm head" : "");
    std::cout << fmt::format(
        "attention      {} query heads, {} kv heads, head_dim {}, rope theta {}, max positions "
        "{}\n",
        c.num_heads, c.num_kv_heads, c.head_dim, c.rope_theta, c.max_position_embeddings);
    std::cout << fmt::format("parameters     {}\n", with_commas(c.parameter_count()));
    std::vector<std::string> yes, no;
    for (const model::ModelCapability& f : caps.features) {
      if (f.supported) {
        yes.push_back(model::feature_name(f.feature));
      } else {
        no.push_back(fmt::format("{} ({})", model::feature_name(f.feature), f.why));
      }
    }
    std::cout << fmt::format("supports       {}\n", fmt::join(yes, ", "));
    if (!no.empty()) std::cout << fmt::format("not supported  {}\n", fmt::join(no, "; "));
    for (const std::string& note : src->notes())
      std::cout << fmt::format("note           {}\n", note);
    if (!w.types.empty()) {
      std::vector<std::string> parts;
      for (const auto& t : w.types)
        parts.push_back(fmt::format("{} x{} ({})", t.type, t.tensors,
                                    human_bytes(static_cast<double>(t.bytes))));
      std::cout << fmt::format("stored as      {}: {}\n",
                               human_bytes(static_cast<double>(w.file_bytes)),
                               fmt::join(parts, ", "));
    }
    std::cout << fmt::format(
        "weights        {} ({}){}\n",
        human_bytes(static_cast<double>(w.present ? w.bytes : expected_weight_bytes)), w.held_as,
        !w.present                        ? "; expected size, no weight files present"
        : !src->gguf()                    ? ""
        : opt.dtype == WeightDType::kAuto ? "; as loaded: quantized types the CPU computes on kept "
                                            "as stored, others dequantized (--dtype)"
                                          : "; as loaded, quantized tensors dequantized (--dtype)");
    std::cout << fmt::format("kv per token   last_exited {} ({} planes), shared {} ({} plane{}), {}\n",
                             human_bytes(static_cast<double>(last_exited)), c.total_ut_steps + outer_planes,
                             human_bytes(static_cast<double>(shared)), 1 + outer_planes, outer_planes > 0 ? "s" : "",
                             w.kv_dtype);
    std::cout << fmt::format("eos ids        {}\n", fmt::join(c.eos_token_ids, ", "));
    std::cout << fmt::format("tokenizer      {}\n", tokenizer_summary(*src));
    std::cout << fmt::format(
        "cpu kernels    {} (Highway dynamic dispatch); AVX512_BF16 dot products {}; "
        "int8 dot products {}\n",
        kernels::cpu_dispatch_target(),
        kernels::bf16_dot_supported() ? "available (--activation-dtype bf16)" : "not available",
        kernels::linear_quant_int8_supported()
            ? fmt::format("available (--activation-dtype int8; {})",
                          kernels::linear_quant_int8_kernel())
            : std::string("not available"));
    std::cout << fmt::format("cuda           {}\n", cuda_summary());
    std::cout << fmt::format("validation     {}\n", w.validation);
  }
  return w.broken || (w.present && !w.ok) ? 1 : 0;
}

}  // namespace

void add_info_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info",
                                     "Describe a model folder or GGUF file: shape, parameters, "
                                     "weight and KV sizes, tokenizer, validation");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  add_enum_option(*cmd, "--dtype", opt->dtype, parse_weight_dtype, kWeightDTypeHelp);
  cmd->add_flag("--json", opt->json, "Print JSON instead of text");
  cmd->callback([opt, exit_code] { *exit_code = run_info(*opt); });
}

}  // namespace rlt::cli
