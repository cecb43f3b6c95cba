// `rlt bench`: offline, closed-loop throughput. Keeps --concurrency requests in flight until
// --num-requests finished, once at full depth with plain decoding, once with speculative decoding
// when --speculative-method is given (the speed-up, acceptance rate and mean accepted length),
// and once with the requested early-exit settings (tokens/s, mean loops per token and the share of
// the ideal early-exit speed-up = full-depth loops per token / mean loops per token).
//
// Per request it also times prefill (prompt tokens / time to the first token) and decode (later
// tokens / time after the first), and judges the decode rate against the memory roofline: the
// bytes one token reads (every loop's linear weights and K/V, the lm head) at the copy bandwidth
// measured in the same run. At --concurrency 1 these are the single-stream figures peers such as
// llama-bench report (pp and tg).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "runner/device_choice.h"
#include "source/model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

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
  bool no_roofline = false;
  int warmup_requests = 0;
  // Runs of each configuration, alternating (plain, speculative, plain, ...); the best is kept, and
  // each pair's ratio: on a shared machine the memory bandwidth drifts by tens of percent over a
  // minute.
  int repeat = 1;
  // JSONL of real prompts, {"prompt": text} or {"messages": [...]} per line, used in turn instead
  // of random tokens (input-grounded workloads for speculative decoding, say).
  std::string prompts_file;
};

// The middle value (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// A prompt of --prompts: its ids, and the end-of-turn ids of the chat template when it came as
// messages.
struct BenchPrompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> stop_ids;
};

Result<std::vector<BenchPrompt>> load_prompts(const std::string& file, const std::string& dir) {
  std::ifstream in(file);
  if (!in) return not_found(fmt::format("--prompts: cannot read {}", file));
  RLT_ASSIGN_OR_RETURN(source::ModelSource src, source::ModelSource::open(dir));
  RLT_ASSIGN_OR_RETURN(auto tokenizer, src.tokenizer());
  std::optional<tok::ChatTemplate> tmpl;
  std::vector<BenchPrompt> prompts;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
    BenchPrompt p;
    if (j.is_object() && j.contains("prompt") && j["prompt"].is_string()) {
      RLT_ASSIGN_OR_RETURN(p.ids, tokenizer->encode(j["prompt"].get<std::string>(), /*add_special_tokens=*/true));
    } else if (j.is_object() && j.contains("messages") && j["messages"].is_array()) {
      if (!tmpl) {
        RLT_ASSIGN_OR_RETURN(tok::ChatTemplate t, src.chat_template());
        tmpl.emplace(std::move(t));
      }
      RLT_ASSIGN_OR_RETURN(std::string text, tmpl->render(j["messages"], /*add_generation_prompt=*/true));
      RLT_ASSIGN_OR_RETURN(p.ids, tokenizer->encode(text, /*add_special_tokens=*/false));
      p.stop_ids = tok::end_of_turn_ids(*tmpl, *tokenizer);
    } else {
      return invalid_argument(fmt::format("--prompts {} line {}: expected {{\"prompt\": text}} or {{\"messages\": "
                                          "[...]}}",
                                          file, no));
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return invalid_argument(fmt::format("--prompts {} holds no prompt", file));
  return prompts;
}

struct RunStats {
  int64_t tokens = 0;
  double seconds = 0;
  double mean_loops = 0;
  // Summed over requests: prompt tokens and the time to their first token; tokens after the first
  // and the time they took.
  int64_t prefill_tokens = 0;
  double prefill_seconds = 0;
  int64_t decode_tokens = 0;
  double decode_seconds = 0;
  // After the last request's first token, when every request is in flight (num_requests <=
  // concurrency): the whole batch's tokens and the time they took. With prefill scheduled first
  // (--max-prefill-batches-before-decode at least the prefill batch count) this is pure decode
  // of the full batch, the figure a peer's per-step decode timing compares with.
  int64_t steady_tokens = 0;
  double steady_seconds = 0;
  ModelFootprint footprint;
  int64_t batches = 0, graph_replays = 0, lookahead_batches = 0,
          device_sampled_batches = 0;  // engine counters of the run
  int64_t recurrent_batches = 0, mixed_depth_batches = 0;
  DeviceStageTimes device_time;       // GPU runs: device time by stage over the run
  // Speculative decoding over the run: verifications, drafts checked and accepted, tokens given.
  int64_t spec_verifications = 0, spec_drafts = 0, spec_accepted = 0, spec_tokens = 0;
  double verify_fixed_seconds = 0, verify_row_seconds = 0;  // the engine's fit at the run's end
  // Wall time inside the runner (the model's passes); the rest of `seconds` is the engine's own
  // work between them: scheduling, drafting, sampling, outputs.
  double runner_seconds = 0;
  double runner_share() const { return seconds > 0 ? runner_seconds / seconds : 0; }
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
  double prefill_tokens_per_s() const { return prefill_seconds > 0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0; }
  double decode_tokens_per_s() const { return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0; }
  double steady_decode_tokens_per_s() const {
    return steady_seconds > 0 ? static_cast<double>(steady_tokens) / steady_seconds : 0;
  }
};

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

Result<RunStats> run_closed_loop(const BenchOptions& opt, const std::string& dir, const SamplingParams& params,
                                 const std::vector<BenchPrompt>& prompts) {
  RLT_ASSIGN_OR_RETURN(auto engine, Engine::create(opt.engine.resolve(dir)));
  std::mt19937_64 rng(opt.prompt_seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(engine->vocab_size()) - 1);
  size_t next_prompt = 0;
  // The next request: the next --prompts entry in turn, else random tokens.
  auto add = [&](uint64_t id) -> Status {
    SamplingParams p = params;
    std::vector<int32_t> prompt;
    if (prompts.empty()) {
      prompt.resize(static_cast<size_t>(opt.prompt_len));
      for (auto& t : prompt) t = token(rng);
    } else {
      const BenchPrompt& b = prompts[next_prompt++ % prompts.size()];
      prompt = b.ids;
      p.stop_token_ids.insert(p.stop_token_ids.end(), b.stop_ids.begin(), b.stop_ids.end());
    }
    return engine->add_request(id, std::move(prompt), p);
  };
  int submitted = 0, finished = 0, in_flight = 0;
  struct Timing {
    Clock::time_point submitted, first_token;
    bool has_first = false;
  };
  std::vector<Timing> timing(static_cast<size_t>(opt.num_requests));
  RunStats s;
  auto submit = [&]() -> Status {
    timing[static_cast<size_t>(submitted)].submitted = Clock::now();
    RLT_RETURN_IF_ERROR(add(static_cast<uint64_t>(submitted)));
    ++submitted;
    ++in_flight;
    return {};
  };
  // Untimed requests first, at the run's concurrency: page faults of the KV pool and scratch
  // buffers, thread start-up, and on a GPU the CUDA graphs of the batch sizes the run will use.
  for (int warm = 0, warm_in_flight = 0; warm < opt.warmup_requests || engine->has_unfinished();) {
    for (; warm_in_flight < opt.concurrency && warm < opt.warmup_requests; ++warm, ++warm_in_flight)
      RLT_RETURN_IF_ERROR(add(static_cast<uint64_t>(opt.num_requests + warm)));
    RLT_ASSIGN_OR_RETURN(auto outs, engine->step());
    for (const auto& o : outs) {
      if (!o.finished) continue;
      if (o.finish_reason == "abort") return internal_error(fmt::format("warm-up request {} was aborted", o.request_id));
      --warm_in_flight;
    }
  }
  const EngineMetrics before = engine->metrics();
  const auto start = Clock::now();
  int first_tokens = 0;
  Clock::time_point all_decoding;
  int64_t generated_when_all_decoding = -1;
  while (finished < opt.num_requests) {
    while (in_flight < opt.concurrency && submitted < opt.num_requests) RLT_RETURN_IF_ERROR(submit());
    RLT_ASSIGN_OR_RETURN(auto outs, engine->step());
    const auto now = Clock::now();
    for (const auto& o : outs) {
      Timing& t = timing.at(o.request_id);
      if (!t.has_first && !o.new_token_ids.empty()) {
        t.has_first = true;
        t.first_token = now;
        s.prefill_tokens += o.prompt_tokens;
        s.prefill_seconds += seconds_between(t.submitted, now);
        if (++first_tokens == opt.num_requests && opt.num_requests <= opt.concurrency) {
          all_decoding = now;
          generated_when_all_decoding = engine->metrics().generated_tokens;
        }
      }
      if (!o.finished) continue;
      ++finished;
      --in_flight;
      if (o.finish_reason == "abort") return internal_error(fmt::format("request {} was aborted", o.request_id));
      s.decode_tokens += o.num_tokens - 1;
      s.decode_seconds += seconds_between(t.first_token, now);
    }
  }
  const auto end = Clock::now();
  s.seconds = seconds_between(start, end);
  s.footprint = engine->footprint();
  const EngineMetrics m = engine->metrics();
  if (generated_when_all_decoding >= 0) {
    s.steady_tokens = m.generated_tokens - generated_when_all_decoding;
    s.steady_seconds = seconds_between(all_decoding, end);
  }
  s.tokens = m.generated_tokens - before.generated_tokens;
  s.runner_seconds = m.runner_seconds - before.runner_seconds;
  const int64_t loops = m.loops_run - before.loops_run;
  s.mean_loops = s.tokens > 0 ? static_cast<double>(loops) / static_cast<double>(s.tokens) : 0.0;
  s.batches = m.batches - before.batches;
  s.recurrent_batches = m.recurrent_batches - before.recurrent_batches;
  s.mixed_depth_batches = m.mixed_depth_batches - before.mixed_depth_batches;
  s.graph_replays = m.cuda_graph_replays - before.cuda_graph_replays;
  s.lookahead_batches = m.lookahead_batches - before.lookahead_batches;
  s.device_sampled_batches = m.device_sampled_batches - before.device_sampled_batches;
  auto since = [](DeviceStageTime now, DeviceStageTime then) {
    return DeviceStageTime{now.milliseconds - then.milliseconds, now.batches - then.batches};
  };
  s.spec_verifications = m.spec_verifications - before.spec_verifications;
  s.spec_drafts = m.spec_draft_tokens - before.spec_draft_tokens;
  s.spec_accepted = m.spec_accepted_tokens - before.spec_accepted_tokens;
  s.spec_tokens = m.spec_verified_tokens - before.spec_verified_tokens;
  s.verify_fixed_seconds = m.spec_verify_fixed_seconds;
  s.verify_row_seconds = m.spec_verify_row_seconds;
  s.device_time = {since(m.device_time.prefill, before.device_time.prefill),
                   since(m.device_time.prelude, before.device_time.prelude),
                   since(m.device_time.recurrent, before.device_time.recurrent),
                   since(m.device_time.coda, before.device_time.coda),
                   since(m.device_time.verify, before.device_time.verify)};
  return s;
}

int run_bench(const BenchOptions& opt) {
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  if (opt.num_requests < 1 || opt.concurrency < 1 || opt.prompt_len < 1 || opt.output_len < 1)
    return report_error(invalid_argument("--num-requests, --concurrency, --prompt-len and --output-len must be positive"));
  SamplingParams params = opt.sampling.resolve();
  params.max_tokens = opt.output_len;
  std::vector<BenchPrompt> prompts;
  if (!opt.prompts_file.empty()) {
    auto loaded = load_prompts(opt.prompts_file, *dir);
    if (!loaded.ok()) return report_error(loaded.status());
    prompts = std::move(*loaded);
  } else {
    params.ignore_eos = true;  // random prompts: every request generates exactly --output-len tokens
  }
  // With speculative decoding configured, the baseline is plain decoding in the same run.
  const SpeculativeConfig& spec_config = opt.engine.config.speculative;
  const bool speculative = spec_config.method != SpeculativeMethod::kOff;
  SamplingParams full = params;
  full.exit_threshold = 1.0;
  full.exit_criterion = ExitCriterion::kGate;  // Huginn has no gate: every step
  full.exit_criterion_threshold.reset();
  full.min_loops = SamplingParams::kDefaultMinLoops;
  full.max_loops = 0;
  full.speculative = SpeculativeParams{SpeculativeMethod::kOff, 0, 0};
  SamplingParams spec_params = full;
  spec_params.speculative.reset();  // the engine's settings
  // The faster of two runs of one configuration.
  auto keep_best = [](Result<RunStats>& best, Result<RunStats> next) {
    if (!next.ok() || (best.ok() && best->tokens_per_s() >= next->tokens_per_s())) return;
    best = std::move(next);
  };
  Result<RunStats> base = run_closed_loop(opt, *dir, full, prompts);
  if (!base.ok()) return report_error(base.status());
  Result<RunStats> spec = internal_error("not run");
  // Each speculative run against the plain run just before it: on a machine whose speed drifts,
  // the median of these pairs is the steadier figure (the best of each side can come from
  // different minutes).
  std::vector<double> pair_decode_speedups;
  double last_plain_decode = base->decode_tokens_per_s();
  for (int i = 0; i < opt.repeat; ++i) {
    if (i > 0) {
      Result<RunStats> plain = run_closed_loop(opt, *dir, full, prompts);
      if (plain.ok()) last_plain_decode = plain->decode_tokens_per_s();
      keep_best(base, std::move(plain));
    }
    if (speculative) {
      Result<RunStats> next = run_closed_loop(opt, *dir, spec_params, prompts);
      if (!next.ok()) return report_error(next.status());
      pair_decode_speedups.push_back(next->decode_tokens_per_s() / last_plain_decode);
      keep_best(spec, std::move(next));
    }
  }
  nlohmann::ordered_json out;
  out["model"] = *dir;
  out["num_requests"] = opt.num_requests;
  out["concurrency"] = opt.concurrency;
  out["prompt_len"] = opt.prompt_len;
  out["output_len"] = opt.output_len;
  const ModelFootprint& f = base->footprint;
  out["threads"] = f.threads;
  out["device"] = f.device;
  out["kernels"] = f.kernel_target;
  out["activation_dtype"] = f.activation_dtype;
  out["loops"] = f.loops;
  out["core_weight_bytes_per_loop"] = f.core_weight_bytes_per_loop;
  out["lm_head_bytes"] = f.lm_head_bytes;
  out["full_depth"] = {{"tokens", base->tokens},
                       {"seconds", base->seconds},
                       {"tokens_per_s", base->tokens_per_s()},
                       {"mean_loops_per_token", base->mean_loops},
                       {"prefill_tokens_per_s", base->prefill_tokens_per_s()},
                       {"decode_tokens_per_s", base->decode_tokens_per_s()},
                       {"steady_decode_tokens_per_s", base->steady_decode_tokens_per_s()},
                       {"batches", base->batches},
                       {"runner_share", base->runner_share()},
                       {"cuda_graph_replays", base->graph_replays},
                       {"lookahead_batches", base->lookahead_batches},
                       {"device_sampled_batches", base->device_sampled_batches}};
  if (base->device_time.recurrent.batches > 0) {
    // Where the device's time went, by stage (each batch's span on the device timeline, launch
    // gaps inside it included): against the run's wall time, how much of it the batches cover;
    // per recurrent batch, what one loop of the core costs.
    const DeviceStageTimes& d = base->device_time;
    nlohmann::ordered_json stages;
    std::string line;
    double span_ms = 0;
    for (const auto& [name, t] : d.named()) {
      stages[name] = {{"milliseconds", t.milliseconds}, {"batches", t.batches}};
      span_ms += t.milliseconds;
      line += fmt::format("{}{} {:.1f} ms / {} batches", line.empty() ? "" : ", ", name, t.milliseconds, t.batches);
    }
    out["full_depth"]["device_time"] = stages;
    out["full_depth"]["device_span_share"] = span_ms / (base->seconds * 1e3);
    std::cerr << fmt::format("device time: {}; {:.3f} ms per recurrent batch; batches span {:.0f}% of the run\n", line,
                             d.recurrent.milliseconds / static_cast<double>(d.recurrent.batches),
                             100.0 * span_ms / (base->seconds * 1e3));
  }
  std::cerr << fmt::format("full depth: {} tokens in {:.2f} s = {:.1f} tokens/s, {:.2f} loops/token; per request: "
                           "prefill {:.1f} tokens/s, decode {:.2f} tokens/s; {:.0f}% of the time in the runner\n", base->tokens,
                           base->seconds, base->tokens_per_s(), base->mean_loops, base->prefill_tokens_per_s(),
                           base->decode_tokens_per_s(), 100.0 * base->runner_share());
  if (base->steady_tokens > 0) {
    std::cerr << fmt::format("steady decode (every request in flight, after the last first token): {} tokens in "
                             "{:.3f} s = {:.1f} tokens/s\n", base->steady_tokens, base->steady_seconds,
                             base->steady_decode_tokens_per_s());
  }
  if (!opt.no_roofline) {
    // Decode at full depth: every loop reads the core's weights and that depth's K/V of the
    // context (on average the prompt plus half the output), then the lm head once. Concurrent
    // requests share the weight reads, so the roofline is per step of the whole batch.
    const double copy_gbs = runner::copy_bandwidth_gbs(f.device);
    const double context = opt.prompt_len + opt.output_len / 2.0;
    const double weights_per_step = static_cast<double>(f.loops * f.core_weight_bytes_per_loop + f.lm_head_bytes);
    const double kv_per_token = static_cast<double>(f.loops * f.kv_bytes_per_token_per_loop) * context;
    const int streams = std::min(opt.concurrency, opt.num_requests);
    const double bytes_per_step = weights_per_step + streams * kv_per_token;
    const double roofline_tokens_per_s = copy_gbs * 1e9 / bytes_per_step * streams;
    const double decode_rate = base->decode_tokens_per_s() * streams;
    out["roofline"] = {{"copy_bandwidth_gbs", copy_gbs},
                       {"bytes_per_decode_step", bytes_per_step},
                       {"weight_bytes_per_step", weights_per_step},
                       {"kv_bytes_per_token", kv_per_token},
                       {"decode_tokens_per_s_roofline", roofline_tokens_per_s},
                       {"decode_share_of_roofline", decode_rate / roofline_tokens_per_s},
                       {"steady_decode_share_of_roofline",
                        base->steady_decode_tokens_per_s() / roofline_tokens_per_s}};
    std::cerr << fmt::format("roofline: {:.2f} GB per decode step at {:.1f} GB/s copy bandwidth = {:.2f} tokens/s; "
                             "decode reaches {:.0f}%\n", bytes_per_step / 1e9, copy_gbs, roofline_tokens_per_s,
                             100.0 * decode_rate / roofline_tokens_per_s);
  }
  if (speculative) {
    const double speedup = spec->tokens_per_s() / base->tokens_per_s();
    const double acceptance =
        spec->spec_drafts ? static_cast<double>(spec->spec_accepted) / static_cast<double>(spec->spec_drafts) : 0.0;
    const double mean_length = spec->spec_verifications ? static_cast<double>(spec->spec_tokens) /
                                                              static_cast<double>(spec->spec_verifications)
                                                        : 0.0;
    out["speculative"] = {
        {"method", name(spec_config.method)},
        {"num_speculative_tokens", spec_config.num_tokens},
        {"draft_loops", spec_config.draft_loops},
        {"adaptive", spec_config.adaptive},
        {"forced_acceptance", spec_config.forced_acceptance},
        {"tokens", spec->tokens},
        {"seconds", spec->seconds},
        {"tokens_per_s", spec->tokens_per_s()},
        {"decode_tokens_per_s", spec->decode_tokens_per_s()},
        {"speedup", speedup},
        {"decode_speedup", spec->decode_tokens_per_s() / base->decode_tokens_per_s()},
        {"verifications", spec->spec_verifications},
        {"draft_tokens", spec->spec_drafts},
        {"accepted_tokens", spec->spec_accepted},
        {"acceptance_rate", acceptance},
        {"mean_accepted_length", mean_length},
        // The verify pass's fitted cost a + b · rows (0: not fitted yet).
        {"verify_pass_fixed_ms", 1e3 * spec->verify_fixed_seconds},
        {"verify_pass_row_ms", 1e3 * spec->verify_row_seconds},
        {"batches", spec->batches},
        {"runner_share", spec->runner_share()},
        {"pair_decode_speedups", pair_decode_speedups},
        {"median_pair_decode_speedup", median(pair_decode_speedups)}};
    std::cerr << fmt::format("speculative ({}): {} tokens in {:.2f} s = {:.1f} tokens/s, speed-up {:.2f}x over plain "
                             "decoding (decode {:.2f}x); {} drafts, {:.1f}% accepted, {:.2f} tokens per "
                             "verification; {:.0f}% of the time in the runner\n",
                             name(spec_config.method), spec->tokens, spec->seconds, spec->tokens_per_s(), speedup,
                             spec->decode_tokens_per_s() / base->decode_tokens_per_s(), spec->spec_drafts,
                             100.0 * acceptance, mean_length, 100.0 * spec->runner_share());
    if (pair_decode_speedups.size() > 1) {
      std::vector<double> sorted = pair_decode_speedups;
      std::sort(sorted.begin(), sorted.end());
      std::cerr << fmt::format(
          "decode speed-up per pair (each speculative run against the plain run before it), "
          "sorted: {:.3f}; median {:.3f}x\n",
          fmt::join(sorted, ", "), median(pair_decode_speedups));
    }
  }
  const bool early_exit =
      params.exit_threshold < 1.0 || params.max_loops != 0 || params.exit_criterion != ExitCriterion::kGate;
  if (early_exit) {
    SamplingParams exit_params = params;
    exit_params.speculative = SpeculativeParams{SpeculativeMethod::kOff, 0, 0};  // exits need plain decoding
    auto exit = run_closed_loop(opt, *dir, exit_params, prompts);
    if (!exit.ok()) return report_error(exit.status());
    const double speedup = exit->tokens_per_s() / base->tokens_per_s();
    const double ideal = base->mean_loops / exit->mean_loops;
    out["early_exit"] = {{"exit_threshold", params.exit_threshold}, {"exit_criterion", name(params.exit_criterion)},
                         {"tokens", exit->tokens}, {"seconds", exit->seconds},
                         {"tokens_per_s", exit->tokens_per_s()}, {"mean_loops_per_token", exit->mean_loops},
                         {"speedup", speedup}, {"ideal_speedup", ideal}, {"share_of_ideal", speedup / ideal},
                         {"recurrent_batches", exit->recurrent_batches},
                         {"mixed_depth_batches", exit->mixed_depth_batches}};
    std::cerr << fmt::format("early exit: {} tokens in {:.2f} s = {:.1f} tokens/s, {:.2f} loops/token; speed-up {:.2f}x "
                             "of an ideal {:.2f}x = {:.0f}%; {} of {} recurrent batches at mixed depths\n",
                             exit->tokens, exit->seconds, exit->tokens_per_s(), exit->mean_loops, speedup, ideal,
                             100.0 * speedup / ideal, exit->mixed_depth_batches, exit->recurrent_batches);
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<BenchOptions>();
  opt->sampling.params.temperature = 0.0;
  CLI::App* cmd = app.add_subcommand("bench", "Offline closed-loop throughput, at full depth and with early exit");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  cmd->add_option("--num-requests", opt->num_requests, "Requests to complete")->capture_default_str();
  cmd->add_option("--concurrency", opt->concurrency, "Requests kept in flight")->capture_default_str();
  cmd->add_option("--prompt-len", opt->prompt_len, "Random prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", opt->output_len, "Generated tokens per request")->capture_default_str();
  cmd->add_option("--prompt-seed", opt->prompt_seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--warmup-requests", opt->warmup_requests, "Untimed requests run before measuring (at --concurrency)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-roofline", opt->no_roofline, "Skip the copy-bandwidth probe and the roofline report");
  cmd->add_option(
         "--repeat", opt->repeat,
         "Runs of the plain and speculative configurations, alternating; the best of each is "
         "reported, "
         "and each speculative run's decode speed-up over the plain run before it (their median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prompts", opt->prompts_file,
                  "JSONL of real prompts ({\"prompt\": text} or {\"messages\": [...]} per line), used in turn "
                  "instead of random ones; requests then stop at EOS");
  add_sampling_flags(*cmd, opt->sampling);
  // A benchmark measures the packed kernels from its first request, not a start-up ramp.
  opt->engine.pack_weights = "at-load";
  add_engine_flags(*cmd, opt->engine);
  cmd->callback([opt, exit_code] { *exit_code = run_bench(*opt); });
}

}  // namespace rlt::cli
