#include "cli/engine_flags.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace rlt::cli {

template <typename E>
void add_enum_option(CLI::App& cmd, const std::string& flag, E& value,
                     Result<E> (*parse)(std::string_view), const std::string& description) {
  cmd.add_option_function<std::string>(
         flag,
         [&value, parse](const std::string& text) {
           Result<E> parsed = parse(text);
           if (!parsed.ok()) throw CLI::ValidationError(parsed.status().message());
           value = *parsed;
         },
         description)
      ->default_str(std::string(name(value)));
}

template void add_enum_option<WeightDType>(CLI::App&, const std::string&, WeightDType&,
                                           Result<WeightDType> (*)(std::string_view),
                                           const std::string&);
template void add_enum_option<QuantizeType>(CLI::App&, const std::string&, QuantizeType&,
                                            Result<QuantizeType> (*)(std::string_view),
                                            const std::string&);
template void add_enum_option<ActivationDType>(CLI::App&, const std::string&, ActivationDType&,
                                               Result<ActivationDType> (*)(std::string_view),
                                               const std::string&);

EngineConfig EngineFlags::resolve(const std::string& model_dir) const {
  EngineConfig c = config;
  c.model = model_dir;
  if (c.packed_cache_dir == "off") c.packed_cache_dir.clear();
  c.defer_packing = pack_weights == "deferred";
  c.kv_cache_bytes = static_cast<int64_t>(kv_cache_gib * static_cast<double>(int64_t{1} << 30));
  c.preemption_host_bytes = static_cast<int64_t>(preemption_host_gib * static_cast<double>(int64_t{1} << 30));
  c.incremental_kv = !no_incremental_kv;
  c.attention_backend = attention.backend;
  c.block_size = attention.block_size;
  c.require_deterministic_attention = attention.deterministic;
  c.require_packed_prefill = attention.packed_prefill;
  c.async_scheduling = attention.async_scheduling;
  c.cuda_graphs = attention.cuda_graphs ? CudaGraphs::kOn
                                        : (no_cuda_graphs ? CudaGraphs::kOff : CudaGraphs::kAuto);
  c.device_sampling = !host_sampling;
  c.adaptive_threads = !no_adaptive_threads;
  c.speculative.adaptive = !no_adaptive_speculation;
  return c;
}

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
  EngineConfig& c = f.config;
  add_attention_flags(cmd, f.attention);
  cmd.add_option("--kv-cache-gib", f.kv_cache_gib,
                 "Memory for the K and V pools (default: 1 GiB on the CPU; on a GPU what "
                 "--gpu-memory-utilization leaves)");
  cmd.add_option("--gpu-memory-utilization", c.gpu_memory_utilization,
                 "GPU runs without --kv-cache-gib: the share of the device's memory the run may "
                 "use; the KV cache gets what weights, activations and workspaces leave of it")
      ->capture_default_str();
  cmd.add_option("--num-kv-blocks", c.num_kv_blocks, "KV pages (overrides --kv-cache-gib; 0 = from it)")->capture_default_str();
  add_enum_option(cmd, "--kv-layout", c.kv_layout, parse_kv_layout,
                  "last_exited (one plane per loop) or shared (one plane)");
  add_enum_option(
      cmd, "--dtype", c.dtype, parse_weight_dtype, kWeightDTypeHelp);
  add_enum_option(cmd, "--quantize", c.quantize, parse_quantize_type, kQuantizeHelp);
  c.packed_cache_dir = "auto";
  cmd.add_option("--packed-cache", c.packed_cache_dir,
                 "CPU runs: keep the weights packed for the kernels in this folder and map them at "
                 "the next start instead of packing again (auto: ~/.cache/rlt/packed, at most "
                 "32 GiB, least recently used files first out; off: pack at every start; "
                 "docs/loading.md)")
      ->capture_default_str();
  cmd.add_option("--pack-weights", f.pack_weights,
                 "CPU runs, bf16/f16 weights without a packed cache to map: deferred (answer at "
                 "once from the checkpoint's rows, pack a layer at a time between batches and "
                 "while idle; same results) or at-load (pack before the first request)")
      ->check(CLI::IsMember({"deferred", "at-load"}))
      ->capture_default_str();
  add_enum_option(cmd, "--kv-dtype", c.kv_dtype, parse_kv_dtype,
                  "K/V cache dtype: auto (the weights' float type; bf16 for quantized weights), "
                  "f32, bf16, f16, q8_0 (GGML blocks of 32 values with an f16 scale: 53 % of "
                  "bf16's bytes, CPU attention only)");
  cmd.add_flag("--enable-prefix-caching", c.enable_prefix_caching, "Share full prompt pages between requests");
  cmd.add_option("--watermark", c.watermark, "Share of the pool admission keeps free for growth")->capture_default_str();
  auto per_device = [](int64_t cpu, int64_t gpu) {
    return fmt::format(" (default: {} on the CPU, {} on a GPU)", cpu, gpu);
  };
  cmd.add_option("--max-num-seqs", c.max_num_seqs,
                 "Admitted requests, and rows per batch" +
                     per_device(kCpuScheduling.max_num_seqs, kGpuScheduling.max_num_seqs));
  cmd.add_option("--max-num-batched-tokens", c.max_num_batched_tokens,
                 "Rows per batch" + per_device(kCpuScheduling.max_num_batched_tokens,
                                               kGpuScheduling.max_num_batched_tokens));
  cmd.add_option(
      "--prefill-chunk-size", c.prefill_chunk_size,
      "Prompt tokens per request per prefill batch" +
          per_device(kCpuScheduling.prefill_chunk_size, kGpuScheduling.prefill_chunk_size));
  cmd.add_option("--max-prefill-batches-before-decode", c.max_prefill_batches_before_decode,
                 "Prefill batches allowed before a due recurrent batch")->capture_default_str();
  cmd.add_option("--admission-scan-limit", c.admission_scan_limit, "Waiting requests examined per admission pass")->capture_default_str();
  cmd.add_option("--max-admission-bypasses", c.max_admission_bypasses, "How often a deferred request may be overtaken")->capture_default_str();
  add_enum_option(cmd, "--batch-mode", c.batch_mode, parse_batch_mode,
                  "refill (Continuous Depth Batching) or no_refill (cohorts)");
  add_enum_option(cmd, "--policy", c.policy, parse_queue_policy,
                  "fcfs or priority (lower priority values first)");
  add_enum_option(cmd, "--exit-policy", c.exit_policy, parse_exit_policy,
                  "ouro, ouro_delayed or trace");
  SpeculativeConfig& spec = c.speculative;
  add_enum_option(cmd, "--speculative-method", spec.method, parse_speculative_method,
                  "Speculative decoding (output unchanged): off, ngram (prompt lookup) or self (drafts "
                  "run the first --draft-loops loops)");
  cmd.add_option("--num-speculative-tokens", spec.num_tokens, "Drafts verified per step at most (K)")
      ->capture_default_str();
  cmd.add_option("--draft-loops", spec.draft_loops, "Self drafting: loops a draft runs (0 = half the depth)")
      ->capture_default_str();
  cmd.add_option("--ngram-max", spec.ngram_max, "Prompt lookup: longest suffix matched")->capture_default_str();
  cmd.add_option("--ngram-min", spec.ngram_min, "Prompt lookup: shortest suffix matched")->capture_default_str();
  cmd.add_option("--speculative-forced-acceptance", spec.forced_acceptance,
                 "Benchmarks only: keep each draft with this probability instead of checking it (the output "
                 "is then not the model's; 0 = off)")
      ->capture_default_str();
  cmd.add_flag("--no-adaptive-speculation", f.no_adaptive_speculation,
               "Always verify K drafts when there are any (default: per request from its acceptance and the "
               "measured cost of a verify pass; none in compute-bound batches)");
  cmd.add_flag("--no-incremental-kv", f.no_incremental_kv, "Claim a request's whole KV at admission");
  cmd.add_flag("--enable-preemption", c.enable_preemption, "Suspend requests to host memory when KV runs out");
  cmd.add_option("--preemption-host-gib", f.preemption_host_gib, "Host memory for suspended requests")->capture_default_str();
  cmd.add_option("--seed", c.seed, "Engine seed: requests without a seed derive theirs from it")->capture_default_str();
  cmd.add_option("--threads", c.threads, "CPU kernel threads (0 = all cores)")->capture_default_str();
  cmd.add_flag("--no-adaptive-threads", f.no_adaptive_threads,
               "CPU runs: always use --threads threads (default: fewer while other processes keep cores busy)");
  cmd.add_flag("--no-cuda-graphs", f.no_cuda_graphs, "GPU runs: never capture CUDA graphs (default: capture per "
               "batch bucket, eager if capture fails; --cuda-graphs makes graphs required)")
      ->excludes("--cuda-graphs");
  cmd.add_flag("--pdl", c.programmatic_launch,
               "GPU runs on sm_90+: programmatic dependent launch (each kernel starts launching while "
               "the previous one finishes)");
  cmd.add_flag("--host-sampling", f.host_sampling,
               "GPU runs: copy the logits to the host sampler instead of sampling on the device");
  cmd.add_option("--device", c.device, "Where the model runs: cpu, or cuda / cuda:N (CUDA builds)")->capture_default_str();
  add_enum_option(
      cmd, "--activation-dtype", c.activation_dtype, parse_activation_dtype, kActivationDTypeHelp);
}

SamplingParams SamplingFlags::resolve() const {
  SamplingParams p = params;
  if (seed >= 0) p.seed = static_cast<uint64_t>(seed);
  if (logprobs >= 0) p.logprobs = logprobs;
  return p;
}

namespace {

// "@path": the file's text; anything else: the text itself.
std::string text_or_file(const std::string& value) {
  if (value.empty() || value[0] != '@') return value;
  std::ifstream in(value.substr(1), std::ios::binary);
  if (!in) throw CLI::ValidationError(value, "cannot read the file " + value.substr(1));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Structured output (docs/structured_output.md): one constraint per run, compiled by the engine
// when the first request is added (an unsupported feature is reported there, by name).
void add_structured_output_flags(CLI::App& cmd, SamplingParams& p) {
  using Kind = StructuredOutputs::Kind;
  auto set = [&p](Kind kind, std::string spec, std::vector<std::string> choices = {}) {
    p.structured_outputs = StructuredOutputs{kind, std::move(spec), std::move(choices)};
  };
  auto* schema = cmd.add_option_function<std::string>(
      "--json-schema", [set](const std::string& v) { set(Kind::kJsonSchema, text_or_file(v)); },
      "Constrain the output to instances of this JSON schema (text, or @file)");
  auto* json = cmd.add_flag_function(
      "--json", [set](int64_t) { set(Kind::kJsonObject, ""); }, "Constrain the output to a JSON object");
  auto* regex = cmd.add_option_function<std::string>(
      "--regex", [set](const std::string& v) { set(Kind::kRegex, v); },
      "Constrain the output to a full match of this regular expression");
  auto* grammar = cmd.add_option_function<std::string>(
      "--grammar", [set](const std::string& v) { set(Kind::kGrammar, text_or_file(v)); },
      "Constrain the output to a GBNF grammar (llama.cpp's notation; text, or @file)");
  auto* choice = cmd.add_option_function<std::vector<std::string>>(
      "--choice", [set](const std::vector<std::string>& v) { set(Kind::kChoice, "", v); },
      "Constrain the output to exactly one of these strings (comma-separated)");
  choice->delimiter(',');
  const std::vector<CLI::Option*> all = {schema, json, regex, grammar, choice};
  for (CLI::Option* a : all) {
    for (CLI::Option* b : all) {
      if (a != b) a->excludes(b);
    }
  }
}

}  // namespace

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f) {
  SamplingParams& p = f.params;
  cmd.add_option("--max-tokens", p.max_tokens, "Tokens to generate per request")->capture_default_str();
  cmd.add_option("--temperature", p.temperature, "0 = greedy")->capture_default_str();
  cmd.add_option("--top-k", p.top_k, "-1 = off")->capture_default_str();
  cmd.add_option("--top-p", p.top_p, "Nucleus sampling mass")->capture_default_str();
  cmd.add_option("--min-p", p.min_p, "Drop tokens below min_p x the top probability")->capture_default_str();
  cmd.add_option("--sampling-seed", f.seed, "Per-request seed (default: derived from --seed and the request id)");
  cmd.add_option("--repetition-penalty", p.repetition_penalty, "1 = off")->capture_default_str();
  cmd.add_option("--presence-penalty", p.presence_penalty, "[-2, 2]")->capture_default_str();
  cmd.add_option("--frequency-penalty", p.frequency_penalty, "[-2, 2]")->capture_default_str();
  cmd.add_option("--stop-token-ids", p.stop_token_ids, "Extra token ids that end a request")->delimiter(',');
  cmd.add_flag("--ignore-eos", p.ignore_eos, "Keep generating after an end-of-sequence token");
  cmd.add_option("--logprobs", f.logprobs, "Return the sampled token's logprob and the N most likely");
  cmd.add_option("--min-loops", p.min_loops, "Fewest loops a generated token runs")->capture_default_str();
  cmd.add_option("--max-loops", p.max_loops, "Most loops a generated token runs (0 = the model's depth)")->capture_default_str();
  cmd.add_option("--exit-threshold", p.exit_threshold, "Exit once the cumulative exit probability reaches this (1 = never early)")
      ->capture_default_str();
  add_enum_option(cmd, "--exit-criterion", p.exit_criterion, &parse_exit_criterion,
                  "When a generated token stops looping: gate (the model's exit gate, --exit-threshold), or "
                  "Huginn's none, latent-diff, entropy-diff, kl, minp-kl, argmax-stability");
  cmd.add_option_function<double>(
      "--exit-criterion-threshold", [&p](double v) { p.exit_criterion_threshold = v; },
      "The criterion's threshold (default: its own: latent-diff 0.03, entropy-diff 1e-3, kl 5e-4, "
      "minp-kl 1e-6, argmax-stability 5)");
  cmd.add_option("--priority", p.priority, "Lower = more urgent (policy priority)")->capture_default_str();
  add_structured_output_flags(cmd, p);
}

}  // namespace rlt::cli
