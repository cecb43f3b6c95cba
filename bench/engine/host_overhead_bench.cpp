// Host overhead per generated token over one long generation: each step's wall time minus the
// time spent in attention (which grows with the context by nature), averaged over a window at
// the start and one at the end of the generation. With outputs that carry only what is new and
// no per-step walks, the two are equal within noise; anything that grows with the output length
// shows up as a ratio above 1.
//
//   rlt_host_overhead_bench [--model DIR] [--tokens 4096] [--window 512] [--repeats 3]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "common/log.h"
#include "model/demo_checkpoint.h"
#include "rlt/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

struct TokenCost {
  double wall = 0.0, attention = 0.0, runner = 0.0;  // seconds since the previous token
};

// Per token: wall time; attention; host = wall - attention (the measure, which still
// holds the model's linear layers, slowed when a long context's K/V evicts the weights from the
// caches); engine = wall - runner (the engine's own work: scheduling, planning, sampling,
// outputs).
struct Window {
  double wall_us = 0.0, attention_us = 0.0, host_us = 0.0, engine_us = 0.0;
};

Window average(const std::vector<TokenCost>& costs, size_t begin, size_t end) {
  Window w;
  double runner_us = 0.0;
  for (size_t i = begin; i < end; ++i) {
    w.wall_us += costs[i].wall * 1e6;
    w.attention_us += costs[i].attention * 1e6;
    runner_us += costs[i].runner * 1e6;
  }
  const double n = static_cast<double>(end - begin);
  w.wall_us /= n;
  w.attention_us /= n;
  runner_us /= n;
  w.host_us = w.wall_us - w.attention_us;
  w.engine_us = w.wall_us - runner_us;
  return w;
}

rlt::Result<std::vector<TokenCost>> generate(const rlt::EngineConfig& config, int tokens) {
  RLT_ASSIGN_OR_RETURN(auto engine, rlt::Engine::create(config));
  rlt::SamplingParams p;
  p.max_tokens = tokens;
  p.ignore_eos = true;
  RLT_RETURN_IF_ERROR(engine->add_request(1, {1}, p));
  std::vector<TokenCost> costs;
  costs.reserve(static_cast<size_t>(tokens));
  TokenCost pending;
  rlt::EngineMetrics before = engine->metrics();
  while (engine->has_unfinished()) {
    const auto start = Clock::now();
    RLT_ASSIGN_OR_RETURN(auto outputs, engine->step());
    pending.wall += std::chrono::duration<double>(Clock::now() - start).count();
    const rlt::EngineMetrics now = engine->metrics();
    pending.attention += now.attention_seconds - before.attention_seconds;
    pending.runner += now.runner_seconds - before.runner_seconds;
    before = now;
    for (const rlt::RequestOutput& o : outputs) {
      for (size_t k = 0; k < o.new_token_ids.size(); ++k) {
        costs.push_back(pending);
        pending = {};
      }
    }
  }
  return costs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Host overhead per token at the start and the end of one long generation");
  std::string model;
  int tokens = 4096, window = 512, repeats = 3, threads = 0;
  app.add_option("--model", model, "Model folder or .gguf (default: the embedded demo model)");
  app.add_option("--tokens", tokens, "Tokens to generate (prompt: one token)")
      ->check(CLI::PositiveNumber);
  app.add_option("--window", window, "Tokens averaged at each end")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "Generations (the median ratio is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "CPU kernel threads (0 = all cores)");
  CLI11_PARSE(app, argc, argv);
  rlt::set_log_level(rlt::LogLevel::kWarn);
  if (model.empty()) {
    model = (std::filesystem::temp_directory_path() / rlt::model::kDemoModelName).string();
    if (auto s = rlt::model::write_demo_checkpoint(model); !s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 1;
    }
  }
  if (2 * window + 16 > tokens) {
    std::fprintf(stderr, "error: --tokens must cover two windows and 16 warm-up tokens\n");
    return 2;
  }
  rlt::EngineConfig config;
  config.model = model;
  config.threads = threads;
  std::vector<double> ratios, engine_ratios;
  for (int r = 0; r < repeats; ++r) {
    auto costs = generate(config, tokens);
    if (!costs.ok()) {
      std::fprintf(stderr, "error: %s\n", costs.status().to_string().c_str());
      return 1;
    }
    const size_t n = costs->size();
    // The first tokens pay for the prefill and warm-up: the start window begins after them.
    const Window first = average(*costs, 16, 16 + static_cast<size_t>(window));
    const Window last = average(*costs, n - static_cast<size_t>(window), n);
    ratios.push_back(last.host_us / first.host_us);
    engine_ratios.push_back(last.engine_us / first.engine_us);
    fmt::print(
        "run {}: {} tokens; tokens 16..{}: {:.1f} us/token ({:.1f} attention, {:.1f} host, "
        "{:.1f} engine); last {}: {:.1f} us/token ({:.1f} attention, {:.1f} host, {:.1f} "
        "engine); end/start: host {:.3f}, engine {:.3f}\n",
        r + 1, n, 16 + window, first.wall_us, first.attention_us, first.host_us, first.engine_us,
        window, last.wall_us, last.attention_us, last.host_us, last.engine_us, ratios.back(),
        engine_ratios.back());
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(engine_ratios.begin(), engine_ratios.end());
  fmt::print(
      "median end/start over {} runs: host (wall - attention) {:.3f}, engine (wall - "
      "runner) {:.3f}\n",
      repeats, ratios[ratios.size() / 2], engine_ratios[engine_ratios.size() / 2]);
  return 0;
}
