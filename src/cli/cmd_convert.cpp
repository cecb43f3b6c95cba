// `rlt convert --to gguf`: any model rlt reads (a Hugging Face folder or a GGUF file) written as a
// GGUF file in llama.cpp's layout, its linear layers quantized with ggml's reference quantizers
// (io/gguf_export.h).
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/model_dir.h"
#include "io/gguf_export.h"
#include "io/gguf_model.h"
#include "model/model_capabilities.h"
#include "quant/ggml_type.h"
#include "source/model_source.h"

namespace rlt::cli {
namespace {

struct ConvertOptions {
  std::string model;
  std::string to = "gguf";
  std::string type = "q8_0";
  std::string out;
  int threads = 0;
};

int fail(const Status& s) {
  std::cerr << "error: " << s.to_string() << "\n";
  return 1;
}

int run_convert(const ConvertOptions& o) {
  if (o.to != "gguf")
    return fail(invalid_argument(fmt::format("--to {}: rlt converts to gguf only", o.to)));
  auto type = io::parse_gguf_export_type(o.type);
  if (!type.ok()) return fail(type.status().with_context("--type"));
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const auto start = std::chrono::steady_clock::now();
  auto dir = resolve_model_dir(o.model);
  if (!dir.ok()) return fail(dir.status());
  auto src = source::ModelSource::open(*dir);
  if (!src.ok()) return fail(src.status());
  const model::ModelCapabilities caps = model::model_capabilities(src->config());
  if (!caps.supports(model::ModelFeature::kGguf)) {
    return fail(unimplemented(fmt::format("rlt convert: this {} model has no GGUF form ({}); run it from its folder",
                                          caps.architecture, caps.get(model::ModelFeature::kGguf).why)));
  }
  // Every quantized type kept in its blocks: the embedding is copied as stored and the matrices
  // are read row by row from their blocks, never through a second dequantized copy.
  std::set<quant::GgmlType> all;
  for (uint32_t t = 0; t < 64; ++t) {
    const auto info = quant::ggml_type_info(t);
    if (info && info->block_elems > 1 && info->dequantizable) all.insert(info->type);
  }
  auto checkpoint = src->open_checkpoint(io::QuantizedTensors(DType::kF32, all));
  if (!checkpoint.ok()) return fail(checkpoint.status());
  io::GgufExportOptions options;
  options.matrix_type = *type;
  options.metadata_from = src->gguf();
  options.name = src->default_name();
  auto report = io::export_gguf(*checkpoint, src->config(), options, o.out);
  if (!report.ok()) return fail(report.status().with_context(fmt::format("writing {}", o.out)));
  for (const std::string& note : report->notes) std::cerr << "note: " << note << "\n";
  if (!src->gguf() && src->config().architecture != io::Architecture::kOuro)
    std::cerr << "note: no tokenizer vocabulary is written from a folder; rlt reads token ids from "
                 "the file, llama.cpp needs a vocabulary (convert the folder with llama.cpp's "
                 "converter, or convert a GGUF file)\n";
  std::vector<std::string> types;
  for (const auto& [name, count] : report->types)
    types.push_back(fmt::format("{} {}", count, name));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format("wrote {}: {} tensors ({}), {:.1f} MB of tensor data, in {:.1f} s\n",
                           o.out, report->tensors, fmt::join(types, ", "),
                           static_cast<double>(report->bytes) / 1e6, seconds);
  return 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* cmd =
      app.add_subcommand("convert",
                         "Write a model (folder or GGUF) as a GGUF file in llama.cpp's layout, its "
                         "linear layers in one "
                         "type (the embedding as stored, norms F32; Ouro keeps its exit gate)");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  cmd->add_option("--to", opt->to, "Output format: gguf")->capture_default_str();
  cmd->add_option("--type", opt->type,
                  fmt::format("The linear layers' type: {} (K-quant widths that do not divide "
                              "fall back to q8_0)",
                              io::gguf_export_types()))
      ->capture_default_str();
  cmd->add_option("--out", opt->out, "The GGUF file to write")->required();
  cmd->add_option("--threads", opt->threads, "Threads quantizing (0 = all cores)")
      ->capture_default_str();
  cmd->callback([opt, exit_code] { *exit_code = run_convert(*opt); });
}

}  // namespace rlt::cli
