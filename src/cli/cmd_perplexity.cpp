// `rlt perplexity`: the perplexity of a model on a text, computed as llama.cpp's perplexity tool
// does, so the two are comparable on the same file: the tokens are cut into chunks of --ctx;
// every chunk is evaluated from scratch (all loops of a looped model, as a prompt) and the second
// half of each chunk is scored, each token by the log-softmax the position before it gives it.
// A tokenizer that adds BOS gets it before the text and at the start of every chunk, as there.
//
// The chunks run through the engine as requests with prompt logprobs (the path the server's echo
// and prompt_logprobs use: one prefill pass, batched like any other requests); --reference
// computes them with the dense reference model instead, as a cross-check.
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_dir.h"
#include "model/ouro_weights.h"
#include "model/reference_model.h"
#include "rlt/engine.h"
#include "source/model_source.h"
#include "tokenizer/tokenizer.h"

namespace rlt::cli {
namespace {

struct PerplexityOptions {
  std::string model;
  std::vector<std::string> files;
  std::string ids_file;
  std::string dump_ids;
  int64_t ctx = 512;
  int64_t max_chunks = 0;
  bool reference = false;
  EngineFlags engine;
};

// The negative log-likelihood of chunk tokens first+1 .. ctx-1, each given the tokens before it:
// `logprob(j)` is the logprob position j gives token j + 1.
template <typename Logprob>
double chunk_nll(int64_t first, int64_t ctx, Logprob logprob) {
  double nll = 0.0;
  for (int64_t j = first; j < ctx - 1; ++j) nll -= logprob(j);
  return nll;
}

// Per chunk, the NLL of its scored half through the engine: every chunk a request with prompt
// logprobs (max_tokens 1: the one token generated is not read).
Result<std::vector<double>> engine_nll(const PerplexityOptions& opt, const std::string& model_dir,
                                       const std::vector<std::vector<int32_t>>& chunks,
                                       std::shared_ptr<const tok::Tokenizer> tokenizer) {
  EngineConfig config = opt.engine.resolve(model_dir);
  config.detokenize = false;
  RLT_ASSIGN_OR_RETURN(auto engine, Engine::create(config, std::move(tokenizer)));
  SamplingParams params;
  params.max_tokens = 1;
  params.temperature = 0.0;
  params.prompt_logprobs = 0;
  for (size_t c = 0; c < chunks.size(); ++c) RLT_RETURN_IF_ERROR(engine->add_request(c, chunks[c], params));
  std::vector<RequestResult> results(chunks.size());
  while (engine->has_unfinished()) {
    RLT_ASSIGN_OR_RETURN(auto outputs, engine->step());
    for (const RequestOutput& o : outputs) results.at(o.request_id).append(o);
  }
  const int64_t first = opt.ctx / 2;
  std::vector<double> nll;
  for (const RequestResult& r : results) {
    if (r.finish_reason == "abort") return internal_error(fmt::format("chunk {} failed: {}", r.request_id, r.error));
    if (static_cast<int64_t>(r.prompt_logprobs.size()) != opt.ctx - 1) {
      return internal_error(fmt::format("chunk {} came back with {} prompt logprobs, {} expected", r.request_id,
                                        r.prompt_logprobs.size(), opt.ctx - 1));
    }
    nll.push_back(chunk_nll(first, opt.ctx, [&](int64_t j) {
      return static_cast<double>(r.prompt_logprobs[static_cast<size_t>(j)].logprob);
    }));
  }
  return nll;
}

// The same with the dense reference model, one chunk at a time (log-softmax in double).
Result<std::vector<double>> reference_nll(const PerplexityOptions& opt, const source::ModelSource& src,
                                          const std::vector<std::vector<int32_t>>& chunks) {
  const EngineConfig config = opt.engine.resolve(src.path());
  if (config.threads > 0) omp_set_num_threads(config.threads);
  RLT_ASSIGN_OR_RETURN(auto model, model::load_ouro_model(src, model::load_options(config)));
  const int64_t vocab = model->config.vocab_size;
  std::vector<double> nll;
  for (const std::vector<int32_t>& chunk : chunks) {
    model::ReferenceModel ref(model);
    RLT_ASSIGN_OR_RETURN(auto step, ref.prefill(chunk, /*trace=*/false, /*every_row_logits=*/true));
    nll.push_back(chunk_nll(opt.ctx / 2, opt.ctx, [&](int64_t j) {
      const float* row = step.row_logits.data() + j * vocab;
      double max = row[0];
      for (int64_t v = 1; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - max);
      return static_cast<double>(row[chunk[static_cast<size_t>(j + 1)]]) - (max + std::log(sum));
    }));
  }
  return nll;
}

// The BOS token the tokenizer adds (as llama.cpp's add_bos), or nullopt when it adds none.
std::optional<int32_t> added_bos(const source::ModelSource& src) {
  if (!src.has_tokenizer()) return std::nullopt;
  auto t = src.tokenizer();
  if (!t.ok()) return std::nullopt;
  auto with = (*t)->encode("a", true), without = (*t)->encode("a", false);
  if (!with.ok() || !without.ok() || with->size() <= without->size() || with->empty()) return std::nullopt;
  if (!without->empty() && (*with)[0] == (*without)[0]) return std::nullopt;  // added at the end only
  return (*with)[0];
}

Result<std::vector<int32_t>> read_tokens(const PerplexityOptions& opt, const source::ModelSource& src,
                                         std::optional<int32_t> bos) {
  if (!opt.ids_file.empty()) {
    std::ifstream in(opt.ids_file);
    if (!in) return not_found(fmt::format("cannot open '{}'", opt.ids_file));
    try {
      return nlohmann::json::parse(in).get<std::vector<int32_t>>();
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument(fmt::format("{}: expected a JSON array of token ids ({})", opt.ids_file, e.what()));
    }
  }
  std::string text;
  for (size_t i = 0; i < opt.files.size(); ++i) {
    std::ifstream in(opt.files[i], std::ios::binary);
    if (!in) return not_found(fmt::format("cannot open '{}'", opt.files[i]));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (i > 0) text += "\n";
    text += ss.str();
  }
  RLT_ASSIGN_OR_RETURN(auto tokenizer, src.tokenizer());
  RLT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->encode(text, /*add_special_tokens=*/false));
  if (bos) ids.insert(ids.begin(), *bos);
  return ids;
}

int run_perplexity(const PerplexityOptions& opt) {
  if (opt.files.empty() == opt.ids_file.empty()) return report_error(invalid_argument("give --file (text) or --ids-file"));
  if (opt.ctx < 4) return report_error(invalid_argument("--ctx must be at least 4"));
  auto path = resolve_model_dir(opt.model);
  if (!path.ok()) return report_error(path.status());
  auto src = source::ModelSource::open(*path);
  if (!src.ok()) return report_error(src.status());
  if (opt.ctx > src->config().max_position_embeddings)
    return report_error(invalid_argument(fmt::format("--ctx {} exceeds the model's {} positions", opt.ctx,
                                                     src->config().max_position_embeddings)));
  const std::optional<int32_t> bos = added_bos(*src);
  auto tokens = read_tokens(opt, *src, bos);
  if (!tokens.ok()) return report_error(tokens.status());
  if (!opt.dump_ids.empty()) std::ofstream(opt.dump_ids) << nlohmann::json(*tokens).dump() << "\n";
  int64_t num_chunks = static_cast<int64_t>(tokens->size()) / opt.ctx;
  if (opt.max_chunks > 0) num_chunks = std::min(num_chunks, opt.max_chunks);
  if (num_chunks < 1) {
    return report_error(invalid_argument(fmt::format("the text has {} tokens, fewer than one chunk of --ctx {}",
                                                     tokens->size(), opt.ctx)));
  }
  std::vector<std::vector<int32_t>> chunks;
  for (int64_t c = 0; c < num_chunks; ++c) {
    chunks.emplace_back(tokens->begin() + c * opt.ctx, tokens->begin() + (c + 1) * opt.ctx);
    // As llama.cpp: a tokenizer that adds BOS gets it at the start of every chunk.
    if (bos) chunks.back()[0] = *bos;
  }
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  if (src->has_tokenizer()) {
    if (auto t = src->tokenizer(); t.ok()) tokenizer = *t;
  }
  auto chunk_nlls = opt.reference ? reference_nll(opt, *src, chunks) : engine_nll(opt, *path, chunks, tokenizer);
  if (!chunk_nlls.ok()) return report_error(chunk_nlls.status());
  double nll = 0.0;
  int64_t scored = 0;
  std::vector<double> running;
  for (double chunk : *chunk_nlls) {
    nll += chunk;
    scored += opt.ctx - 1 - opt.ctx / 2;
    running.push_back(std::exp(nll / static_cast<double>(scored)));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::ordered_json out;
  out["model"] = *path;
  out["path"] = opt.reference ? "reference" : "engine";
  out["tokens"] = tokens->size();
  out["ctx"] = opt.ctx;
  out["bos_token"] = bos ? nlohmann::ordered_json(*bos) : nlohmann::ordered_json(nullptr);
  out["chunks"] = num_chunks;
  out["scored_tokens"] = scored;
  out["mean_nll"] = nll / static_cast<double>(scored);
  out["perplexity"] = std::exp(nll / static_cast<double>(scored));
  out["running_perplexity"] = running;
  out["seconds"] = seconds;
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<PerplexityOptions>();
  // Exact K/V by default: perplexity is a measurement (--kv-dtype bf16 to see what it costs).
  opt->engine.config.kv_dtype = KVDType::kF32;
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of the model on a text, chunked as llama.cpp's perplexity tool");
  cmd->add_option("--model", opt->model, kModelFlagHelp);
  cmd->add_option("--file", opt->files, "Text file(s), joined by a newline; repeatable");
  cmd->add_option("--ids-file", opt->ids_file, "A JSON array of token ids instead of text");
  cmd->add_option("--dump-ids", opt->dump_ids, "Write the token ids used as a JSON array");
  cmd->add_option("--ctx", opt->ctx, "Tokens per chunk; the second half of each is scored")->capture_default_str();
  cmd->add_option("--max-chunks", opt->max_chunks, "Score at most this many chunks (0 = all)")->capture_default_str();
  cmd->add_flag("--reference", opt->reference,
                "Compute with the dense reference model (one chunk at a time) instead of the engine");
  add_engine_flags(*cmd, opt->engine);
  cmd->callback([opt, exit_code] { *exit_code = run_perplexity(*opt); });
}

}  // namespace rlt::cli
