// `rlt make-model`: writes a checkpoint of a named shape with deterministic random weights, for
// speed measurements without a download or Python (e.g. on a GPU machine).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "model/demo_checkpoint.h"

namespace rlt::cli {
namespace {

struct MakeModelOptions {
  std::string preset = "ouro-1.4b";
  std::string out;
  int64_t seed = -1;  // -1: the preset's own
};

int run_make_model(const MakeModelOptions& o) {
  auto shape = model::random_checkpoint_preset(o.preset);
  if (!shape.ok()) {
    std::cerr << "error: " << shape.status().message() << "\n";
    return 2;
  }
  const uint64_t seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : shape->seed;
  const auto start = std::chrono::steady_clock::now();
  if (Status s = model::write_random_checkpoint(o.out, *shape, seed); !s.ok()) {
    std::cerr << "error: " << s.to_string() << "\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << fmt::format(
      "wrote {} ({} shape, random bf16 weights from seed {}, {}) in {:.1f} s\n", o.out, o.preset,
      seed, shape->byte_tokenizer ? "byte-level tokenizer" : "no tokenizer", seconds);
  return 0;
}

}  // namespace

void add_make_model_command(CLI::App& app, int* exit_code) {
  auto opts = std::make_shared<MakeModelOptions>();
  CLI::App* cmd = app.add_subcommand(
      "make-model", "Write a checkpoint of a named shape with random weights (for benchmarks)");
  std::string presets;
  for (const model::RandomCheckpointPreset& p : model::random_checkpoint_presets())
    presets += fmt::format("\n  {:<16} {}", p.name, p.description);
  cmd->add_option("--preset", opts->preset, "The shape:" + presets)->capture_default_str();
  cmd->add_option("--out", opts->out, "Folder to write (created if needed)")->required();
  cmd->add_option("--seed", opts->seed,
                  "Seed of the weights (default: the preset's; demo: the demo's)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([opts, exit_code] { *exit_code = run_make_model(*opts); });
}

}  // namespace rlt::cli
