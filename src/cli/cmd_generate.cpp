// `rlt generate`: offline generation through the engine (or the dense reference model), printing
// one JSON object per request with token ids, per-token exit depths and, when the model folder
// has a tokenizer, the text.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "model/reference_model.h"
#include "sampling/rng.h"
#include "source/model_source.h"
#include "tokenizer/tokenizer.h"

namespace rlt::cli {
namespace {

using json = nlohmann::ordered_json;

struct GenerateOptions {
  std::string model;
  std::vector<std::string> prompt_ids;  // one comma-separated list per prompt
  std::vector<std::string> prompts;     // text prompts, encoded with the model's tokenizer
  std::string prompts_file;  // JSONL: {"prompt_ids": [...] | "prompt": "...", ...overrides}
  EngineFlags engine;
  SamplingFlags sampling;
  bool reference = false;
  std::string trace_out;
};

struct Job {
  uint64_t id;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

Result<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return invalid_argument(fmt::format("--prompt-ids: '{}' is not a token id", item));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

// Per-line overrides of a JSONL prompts file; unknown keys are refused.
Status apply_overrides(const json& line, SamplingParams& p, int line_no) {
  for (const auto& [key, value] : line.items()) {
    try {
      if (key == "prompt_ids" || key == "prompt" || key == "id")
        continue;
      else if (key == "max_tokens")
        p.max_tokens = value.get<int64_t>();
      else if (key == "temperature")
        p.temperature = value.get<double>();
      else if (key == "top_k")
        p.top_k = value.get<int64_t>();
      else if (key == "top_p")
        p.top_p = value.get<double>();
      else if (key == "min_p")
        p.min_p = value.get<double>();
      else if (key == "seed")
        p.seed = value.get<uint64_t>();
      else if (key == "repetition_penalty")
        p.repetition_penalty = value.get<double>();
      else if (key == "presence_penalty")
        p.presence_penalty = value.get<double>();
      else if (key == "frequency_penalty")
        p.frequency_penalty = value.get<double>();
      else if (key == "stop_token_ids")
        p.stop_token_ids = value.get<std::vector<int32_t>>();
      else if (key == "ignore_eos")
        p.ignore_eos = value.get<bool>();
      else if (key == "logprobs")
        p.logprobs = value.get<int>();
      else if (key == "min_loops")
        p.min_loops = value.get<int64_t>();
      else if (key == "max_loops")
        p.max_loops = value.get<int64_t>();
      else if (key == "exit_threshold")
        p.exit_threshold = value.get<double>();
      else if (key == "exit_criterion") {
        RLT_ASSIGN_OR_RETURN(p.exit_criterion, parse_exit_criterion(value.get<std::string>()));
      } else if (key == "exit_criterion_threshold")
        p.exit_criterion_threshold = value.get<double>();
      else if (key == "priority")
        p.priority = value.get<int>();
      else
        return invalid_argument(
            fmt::format("prompts file line {}: unknown field '{}'", line_no, key));
    } catch (const json::exception&) {
      return invalid_argument(fmt::format(
          "prompts file line {}: field '{}' has the wrong type ({})", line_no, key, value.dump()));
    }
  }
  return {};
}

// The model's tokenizer, loaded on first use; null when the model has none.
class LazyTokenizer {
 public:
  explicit LazyTokenizer(std::string dir) : dir_(std::move(dir)) {}
  // Built by the CLI already (text prompts), else null.
  std::shared_ptr<const tok::Tokenizer> built() const { return tokenizer_; }
  // Takes the engine's, so that the process builds the tokenizer once.
  void adopt(std::shared_ptr<const tok::Tokenizer> t) {
    if (loaded_ || !t) return;
    loaded_ = true;
    tokenizer_ = std::move(t);
  }
  Result<std::shared_ptr<const tok::Tokenizer>> get() {
    if (!loaded_) {
      loaded_ = true;
      RLT_ASSIGN_OR_RETURN(source::ModelSource src, source::ModelSource::open(dir_));
      if (src.has_tokenizer()) {
        RLT_ASSIGN_OR_RETURN(tokenizer_, src.tokenizer());
      }
    }
    return tokenizer_;
  }
  Result<std::vector<int32_t>> encode(const std::string& text) {
    RLT_ASSIGN_OR_RETURN(auto t, get());
    if (!t)
      return failed_precondition(
          fmt::format("{} has no tokenizer: give --prompt-ids instead of text", dir_));
    return t->encode(text, /*add_special_tokens=*/true);
  }
  // The text of generated tokens (special tokens dropped), or nullopt without a tokenizer.
  std::optional<std::string> text(const std::vector<int32_t>& ids) {
    auto t = get();
    if (!t.ok() || !*t) return std::nullopt;
    auto s = (*t)->decode(ids, /*skip_special_tokens=*/true);
    return s.ok() ? std::optional<std::string>(*s) : std::nullopt;
  }

 private:
  std::string dir_;
  bool loaded_ = false;
  std::shared_ptr<const tok::Tokenizer> tokenizer_;
};

Result<std::vector<Job>> collect_jobs(const GenerateOptions& opt, LazyTokenizer& tokenizer) {
  std::vector<Job> jobs;
  const SamplingParams base = opt.sampling.resolve();
  for (const auto& text : opt.prompt_ids) {
    RLT_ASSIGN_OR_RETURN(auto ids, parse_ids(text));
    jobs.push_back({jobs.size(), std::move(ids), base});
  }
  for (const auto& text : opt.prompts) {
    RLT_ASSIGN_OR_RETURN(auto ids, tokenizer.encode(text));
    jobs.push_back({jobs.size(), std::move(ids), base});
  }
  if (!opt.prompts_file.empty()) {
    std::ifstream in(opt.prompts_file);
    if (!in) return not_found(fmt::format("cannot open --prompts-file '{}'", opt.prompts_file));
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        return invalid_argument(
            fmt::format("prompts file line {}: not valid JSON ({})", line_no, e.what()));
      }
      const bool has_ids = j.is_object() && j.contains("prompt_ids") && j["prompt_ids"].is_array();
      const bool has_text = j.is_object() && j.contains("prompt") && j["prompt"].is_string();
      if (has_ids == has_text)
        return invalid_argument(
            fmt::format("prompts file line {}: needs exactly one of \"prompt_ids\": [...] or "
                        "\"prompt\": \"text\"",
                        line_no));
      Job job{jobs.size(), {}, base};
      if (has_text) {
        RLT_ASSIGN_OR_RETURN(job.prompt, tokenizer.encode(j["prompt"].get<std::string>()));
      }
      try {
        if (has_ids) job.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
        if (j.contains("id")) job.id = j["id"].get<uint64_t>();
      } catch (const json::exception&) {
        return invalid_argument(
            fmt::format("prompts file line {}: prompt_ids must be integers", line_no));
      }
      RLT_RETURN_IF_ERROR(apply_overrides(j, job.params, line_no));
      jobs.push_back(std::move(job));
    }
  }
  if (jobs.empty()) {
    return invalid_argument(
        "no prompts: give --prompt TEXT or --prompt-ids (both repeatable) or --prompts-file "
        "FILE.jsonl");
  }
  return jobs;
}

json trace_json(const model::StepResult& s) {
  return {{"exit_depth", s.exit_depth},
          {"exit_probability", s.exit_probability},
          {"logits", s.logits},
          {"hidden", s.trace.hidden},
          {"gate_logits", s.trace.gate_logits},
          {"criterion_values", s.trace.criterion_values}};
}

// The dense reference model: one request, greedy, with an optional per-step trace.
int run_reference(const std::string& dir, const GenerateOptions& opt, const std::vector<Job>& jobs,
                  LazyTokenizer& tokenizer) {
  model::LoadOptions load = model::load_options(opt.engine.config);
  auto loaded = model::load_ouro_model(dir, load);
  if (!loaded.ok()) return report_error(loaded.status());
  if (auto t = tokenizer.get(); !t.ok()) return report_error(t.status());  // outside the timing
  for (const Job& job : jobs) {
    // Huginn's initial states: the request's seed (the engine's derivation when it has none).
    const uint64_t noise_seed = job.params.seed.value_or(sampling::derive_request_seed(opt.engine.config.seed, std::to_string(job.id)));
    model::ReferenceModel ref(*loaded, model::KvSemantics::kLastExited, noise_seed);
    const auto start = std::chrono::steady_clock::now();
    auto r = ref.generate(job.prompt, job.params.max_tokens,
                          {job.params.min_loops, job.params.max_loops, job.params.exit_threshold,
                           job.params.exit_criterion, job.params.exit_criterion_threshold},
                          job.params.ignore_eos, !opt.trace_out.empty());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) return report_error(r.status());
    double loops = 0;
    for (int64_t d : r->exit_depths) loops += static_cast<double>(d);
    json out{{"id", job.id},
             {"model", dir},
             {"prompt_ids", job.prompt},
             {"tokens", r->tokens},
             {"exit_depths", r->exit_depths},
             {"finish_reason", r->finish_reason},
             {"mean_loops_per_token", loops / static_cast<double>(r->tokens.size())},
             {"elapsed_s", seconds}};
    if (auto text = tokenizer.text(r->tokens)) out["text"] = *text;
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    if (!opt.trace_out.empty()) {
      json trace = json::array();
      for (const auto& step : r->steps) trace.push_back(trace_json(step));
      std::ofstream f(opt.trace_out);
      f << json{{"steps", trace}}.dump();
      if (!f) return report_error(io_error("cannot write --trace-out file " + opt.trace_out));
    }
  }
  return 0;
}

int run_engine(const std::string& dir, const GenerateOptions& opt, const std::vector<Job>& jobs,
               LazyTokenizer& tokenizer) {
  auto engine = Engine::create(opt.engine.resolve(dir), tokenizer.built());
  if (!engine.ok()) return report_error(engine.status());
  tokenizer.adopt((*engine)->tokenizer());
  // Loaded now, so that the timing below is generation only.
  if (auto t = tokenizer.get(); !t.ok()) return report_error(t.status());
  for (const Job& job : jobs) {
    Status s = (*engine)->add_request(job.id, job.prompt, job.params);
    if (!s.ok()) return report_error(s.with_context(fmt::format("request {}", job.id)));
  }
  const auto start = std::chrono::steady_clock::now();
  int failures = 0;
  std::map<uint64_t, RequestResult> results;  // gathered from the engine's delta outputs
  while ((*engine)->has_unfinished()) {
    auto outs = (*engine)->step();
    if (!outs.ok()) return report_error(outs.status());
    for (const RequestOutput& delta : *outs) {
      RequestResult& o = results[delta.request_id];
      o.append(delta);
      if (!o.finished) continue;
      failures += o.finish_reason == "abort";
      double loops = 0;
      for (int32_t d : o.exit_depths) loops += d;
      json out{{"id", o.request_id},
               {"model", dir},
               {"prompt_tokens", o.prompt_tokens},
               {"tokens", o.token_ids},
               {"exit_depths", o.exit_depths},
               {"finish_reason", o.finish_reason},
               {"mean_loops_per_token",
                o.token_ids.empty() ? 0.0 : loops / static_cast<double>(o.token_ids.size())}};
      if (!o.logprobs.empty()) {
        json lps = json::array();
        for (const auto& lp : o.logprobs) {
          json top = json::array();
          for (const auto& t : lp.top) top.push_back({{"token", t.token}, {"logprob", t.logprob}});
          lps.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"top", top}});
        }
        out["logprobs"] = lps;
      }
      if (auto text = tokenizer.text(o.token_ids)) out["text"] = *text;
      std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      results.erase(delta.request_id);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const EngineMetrics m = (*engine)->metrics();
  std::cerr << fmt::format(
      "{} requests, {} tokens in {:.3f} s ({:.1f} tokens/s), {:.2f} loops per token, attention "
      "{}\n",
      jobs.size(), m.generated_tokens, seconds, static_cast<double>(m.generated_tokens) / seconds,
      m.mean_loops_per_token, (*engine)->attention_backend());
  return failures ? 1 : 0;
}

int run_generate(const GenerateOptions& opt) {
  auto dir = resolve_model_dir(opt.model);
  if (!dir.ok()) return report_error(dir.status());
  LazyTokenizer tokenizer(*dir);
  auto jobs = collect_jobs(opt, tokenizer);
  if (!jobs.ok()) return report_error(jobs.status());
  if (opt.reference || !opt.trace_out.empty()) return run_reference(*dir, opt, *jobs, tokenizer);
  return run_engine(*dir, opt, *jobs, tokenizer);
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<GenerateOptions>();
  opt->sampling.params.temperature = 0.0;  // offline generation defaults to greedy
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate tokens for one or many prompts and print JSON per request");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  cmd->add_option("--prompt", opt->prompts,
                  "Prompt text (the model's tokenizer encodes it); repeat for more prompts");
  cmd->add_option("--prompt-ids", opt->prompt_ids,
                  "Prompt token ids, comma separated; repeat for more prompts");
  cmd->add_option("--prompts-file", opt->prompts_file,
                  "JSONL file, one {\"prompt_ids\": [...], \"id\"?, sampling overrides?} per line");
  add_sampling_flags(*cmd, opt->sampling);
  add_engine_flags(*cmd, opt->engine);
  cmd->add_flag("--reference", opt->reference,
                "Use the dense single-request reference model (greedy) instead of the engine");
  cmd->add_option(
      "--trace-out", opt->trace_out,
      "Debug (implies --reference): write per-step logits, hidden states and gate logits as JSON");
  cmd->callback([opt, exit_code] { *exit_code = run_generate(*opt); });
}

}  // namespace rlt::cli
