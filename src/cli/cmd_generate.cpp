// `rlt generate`: greedy generation with the dense reference model, printing JSON.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_dir.h"
#include "model/reference_model.h"

namespace rlt::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::vector<int64_t> prompt_ids;
  int64_t max_tokens = 16;
  double exit_threshold = 1.0;
  int64_t min_loops = 2;
  int64_t max_loops = 0;
  bool ignore_eos = false;
  int threads = 0;
  std::string trace_out;
};

nlohmann::json trace_json(const model::StepResult& s) {
  return {{"exit_depth", s.exit_depth},
          {"exit_probability", s.exit_probability},
          {"logits", s.logits},
          {"hidden", s.trace.hidden},
          {"gate_logits", s.trace.gate_logits}};
}

int run_generate(const GenerateOptions& opt) {
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  auto loaded = model::load_ouro_model(*dir);
  if (!loaded.ok()) return report_error(loaded.status());
  if (opt.prompt_ids.empty()) return report_error(invalid_argument("--prompt-ids needs at least one token id"));
  std::vector<int32_t> prompt;
  for (int64_t id : opt.prompt_ids) {
    if (id < 0 || id >= (*loaded)->config.vocab_size) {
      return report_error(invalid_argument(fmt::format(
          "--prompt-ids: token id {} is outside the vocabulary [0, {})", id, (*loaded)->config.vocab_size)));
    }
    prompt.push_back(static_cast<int32_t>(id));
  }
  model::ReferenceModel ref(*loaded);
  model::ExitParams params{opt.min_loops, opt.max_loops, opt.exit_threshold};
  const auto start = std::chrono::steady_clock::now();
  auto result = ref.generate(prompt, opt.max_tokens, params, opt.ignore_eos, !opt.trace_out.empty());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) return report_error(result.status());
  double loops = 0;
  for (int64_t d : result->exit_depths) loops += static_cast<double>(d);
  nlohmann::ordered_json out;
  out["model"] = *dir;
  out["prompt_ids"] = prompt;
  out["tokens"] = result->tokens;
  out["exit_depths"] = result->exit_depths;
  out["finish_reason"] = result->finish_reason;
  out["mean_loops_per_token"] = loops / static_cast<double>(result->tokens.size());
  out["elapsed_s"] = seconds;
  out["tokens_per_s"] = static_cast<double>(result->tokens.size()) / seconds;
  std::cout << out.dump() << "\n";
  if (!opt.trace_out.empty()) {
    nlohmann::json trace = nlohmann::json::array();
    for (const auto& step : result->steps) trace.push_back(trace_json(step));
    std::ofstream f(opt.trace_out);
    f << nlohmann::json{{"steps", trace}}.dump();
    if (!f) return report_error(io_error("cannot write --trace-out file " + opt.trace_out));
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens greedily and print JSON with token ids and exit depths");
  cmd->add_option("--model", opt->model, "Hugging Face model folder (default: the embedded demo model)");
  cmd->add_option("--prompt-ids", opt->prompt_ids, "Prompt token ids, comma separated")->delimiter(',')->required();
  cmd->add_option("--max-tokens", opt->max_tokens, "Tokens to generate")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--exit-threshold", opt->exit_threshold, "Exit once the cumulative exit probability reaches this (1 = never exit early)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-loops", opt->min_loops, "Fewest loops a generated token runs")->capture_default_str();
  cmd->add_option("--max-loops", opt->max_loops, "Most loops a generated token runs (0 = the model's total_ut_steps)")->capture_default_str();
  cmd->add_flag("--ignore-eos", opt->ignore_eos, "Keep generating after an end-of-sequence token");
  cmd->add_option("--threads", opt->threads, "CPU threads for the kernels (0 = all cores)")->capture_default_str();
  cmd->add_option("--trace-out", opt->trace_out, "Debug: write per-step logits, hidden states and gate logits as JSON");
  cmd->callback([opt, exit_code] { *exit_code = run_generate(*opt); });
}

}  // namespace rlt::cli
