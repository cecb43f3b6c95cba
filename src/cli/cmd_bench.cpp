// `rlt bench`: offline, closed-loop throughput. Keeps --concurrency requests in flight until
// --num-requests finished, once at full depth and once with the requested early-exit settings,
// and reports tokens/s, mean loops per token and the share of the ideal early-exit speed-up
// (ideal = full-depth loops per token / mean loops per token).
#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"

namespace rlt::cli {
namespace {

struct BenchOptions {
  std::string model;
  EngineFlags engine;
  SamplingFlags sampling;
  int num_requests = 32;
  int concurrency = 8;
  int prompt_len = 32;
  int output_len = 64;
  uint64_t prompt_seed = 1;
};

struct RunStats {
  int64_t tokens = 0;
  double seconds = 0;
  double mean_loops = 0;
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};

Result<RunStats> run_closed_loop(const BenchOptions& opt, const std::string& dir, const SamplingParams& params) {
  RLT_ASSIGN_OR_RETURN(auto engine, Engine::create(opt.engine.resolve(dir)));
  std::mt19937_64 rng(opt.prompt_seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(engine->vocab_size()) - 1);
  int submitted = 0, finished = 0, in_flight = 0;
  auto submit = [&]() -> Status {
    std::vector<int32_t> prompt(static_cast<size_t>(opt.prompt_len));
    for (auto& t : prompt) t = token(rng);
    RLT_RETURN_IF_ERROR(engine->add_request(static_cast<uint64_t>(submitted), std::move(prompt), params));
    ++submitted;
    ++in_flight;
    return {};
  };
  const auto start = std::chrono::steady_clock::now();
  while (finished < opt.num_requests) {
    while (in_flight < opt.concurrency && submitted < opt.num_requests) RLT_RETURN_IF_ERROR(submit());
    RLT_ASSIGN_OR_RETURN(auto outs, engine->step());
    for (const auto& o : outs) {
      if (!o.finished) continue;
      ++finished;
      --in_flight;
      if (o.finish_reason == "abort") return internal_error(fmt::format("request {} was aborted", o.request_id));
    }
  }
  RunStats s;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const EngineMetrics m = engine->metrics();
  s.tokens = m.generated_tokens;
  s.mean_loops = m.mean_loops_per_token;
  return s;
}

int run_bench(const BenchOptions& opt) {
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  if (opt.num_requests < 1 || opt.concurrency < 1 || opt.prompt_len < 1 || opt.output_len < 1)
    return report_error(invalid_argument("--num-requests, --concurrency, --prompt-len and --output-len must be positive"));
  SamplingParams params = opt.sampling.resolve();
  params.max_tokens = opt.output_len;
  params.ignore_eos = true;  // every request generates exactly --output-len tokens
  SamplingParams full = params;
  full.exit_threshold = 1.0;
  full.min_loops = SamplingParams::kDefaultMinLoops;
  full.max_loops = 0;
  auto base = run_closed_loop(opt, *dir, full);
  if (!base.ok()) return report_error(base.status());
  nlohmann::ordered_json out;
  out["model"] = *dir;
  out["num_requests"] = opt.num_requests;
  out["concurrency"] = opt.concurrency;
  out["prompt_len"] = opt.prompt_len;
  out["output_len"] = opt.output_len;
  out["full_depth"] = {{"tokens", base->tokens}, {"seconds", base->seconds}, {"tokens_per_s", base->tokens_per_s()},
                       {"mean_loops_per_token", base->mean_loops}};
  std::cerr << fmt::format("full depth: {} tokens in {:.2f} s = {:.1f} tokens/s, {:.2f} loops/token\n", base->tokens,
                           base->seconds, base->tokens_per_s(), base->mean_loops);
  const bool early_exit = params.exit_threshold < 1.0 || params.max_loops != 0;
  if (early_exit) {
    auto exit = run_closed_loop(opt, *dir, params);
    if (!exit.ok()) return report_error(exit.status());
    const double speedup = exit->tokens_per_s() / base->tokens_per_s();
    const double ideal = base->mean_loops / exit->mean_loops;
    out["early_exit"] = {{"exit_threshold", params.exit_threshold}, {"tokens", exit->tokens}, {"seconds", exit->seconds},
                         {"tokens_per_s", exit->tokens_per_s()}, {"mean_loops_per_token", exit->mean_loops},
                         {"speedup", speedup}, {"ideal_speedup", ideal}, {"share_of_ideal", speedup / ideal}};
    std::cerr << fmt::format("early exit: {} tokens in {:.2f} s = {:.1f} tokens/s, {:.2f} loops/token; speed-up {:.2f}x "
                             "of an ideal {:.2f}x = {:.0f}%\n", exit->tokens, exit->seconds, exit->tokens_per_s(),
                             exit->mean_loops, speedup, ideal, 100.0 * speedup / ideal);
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<BenchOptions>();
  opt->sampling.params.temperature = 0.0;
  CLI::App* cmd = app.add_subcommand("bench", "Offline closed-loop throughput, at full depth and with early exit");
  cmd->add_option("--model", opt->model, "Hugging Face model folder (default: the embedded demo model)");
  cmd->add_option("--num-requests", opt->num_requests, "Requests to complete")->capture_default_str();
  cmd->add_option("--concurrency", opt->concurrency, "Requests kept in flight")->capture_default_str();
  cmd->add_option("--prompt-len", opt->prompt_len, "Random prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", opt->output_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--prompt-seed", opt->prompt_seed, "Seed of the random prompts")->capture_default_str();
  add_sampling_flags(*cmd, opt->sampling);
  add_engine_flags(*cmd, opt->engine);
  cmd->callback([opt, exit_code] { *exit_code = run_bench(*opt); });
}

}  // namespace rlt::cli
