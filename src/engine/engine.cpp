#include "rlt/engine.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <deque>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#include "attention/registry.h"
#include "attention/selection.h"
#include "common/log.h"
#include "common/process_memory.h"
#include "engine/gpu_memory_plan.h"
#include "engine/model_input_builder.h"
#include "kernels/cpu/linear.h"
#include "kv/kv_cache_manager.h"
#include "model/deferred_packing.h"
#include "model/loop_program.h"
#include "model/model_capabilities.h"
#include "model/ouro_weights.h"
#include "runner/cpu_model_runner.h"
#include "runner/device_choice.h"
#include "sampling/history.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "sched/scheduler.h"
#include "source/model_source.h"
#include "structured/grammar_compiler.h"
#include "structured/matcher.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/token_bytes.h"
#include "tokenizer/tokenizer.h"

namespace rlt {
namespace {

DType resolve_kv_dtype(KVDType kv, DType weights) {
  switch (kv) {
    case KVDType::kF32:
      return DType::kF32;
    case KVDType::kBF16:
      return DType::kBF16;
    case KVDType::kF16:
      return DType::kF16;
    case KVDType::kQ8_0:
      return DType::kQ8_0;
    case KVDType::kAuto:
      break;
  }
  return weights;
}

// The random stream of a self draft's position: the draft after j others stands where output
// token counter + j will, and uses that token's uniform.
sampling::RngState draft_rng(const sampling::RngState& rng, const sched::Request& r) {
  return {rng.seed, rng.counter + r.spec.drafts.size()};
}

// The most rows whose logits one batch returns: a CODA batch's requests, or a VERIFY batch's
// requests with their drafts.
int64_t max_logit_rows(const EngineConfig& c) {
  if (c.speculative.method == SpeculativeMethod::kOff) return c.max_num_seqs;
  return std::max<int64_t>(c.max_num_seqs, std::min<int64_t>(c.max_num_batched_tokens,
                                                             int64_t{c.max_num_seqs} * (c.speculative.num_tokens + 1)));
}

// --speculative-forced-acceptance: whether the draft at `position` of request `id` is kept, a
// fixed function of both (splitmix64), true with probability `p`.
bool forced_keep(uint64_t id, int64_t position, double p) {
  const uint64_t z = id * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(position) + 0x5851f42d4c957f2dull;
  return sampling::bits_to_unit_double(sampling::mix64(z)) < p;
}

runner::GpuRunnerSettings gpu_runner_settings(const EngineConfig& c) {
  runner::GpuRunnerSettings s{c.cuda_graphs, c.programmatic_launch, c.device_sampling};
  if (c.gpu_preallocate) {
    // The largest batch (as the memory plan counts it), and a recurrent batch padded to its CUDA
    // graph bucket (a power of two: within the plan's slack of twice the rows).
    s.reserve_rows = std::max<int64_t>(c.max_num_batched_tokens,
                                       std::bit_ceil(static_cast<uint64_t>(std::max(c.max_num_seqs, 1))));
    s.reserve_sampling_rows = max_logit_rows(c);
  }
  return s;
}

}  // namespace

EngineConfig with_device_defaults(EngineConfig c) {
  const bool cuda = c.device != "cpu";  // choose_device has vetted (or will reject) the name
  if (c.kv_cache_bytes == 0 && !cuda) c.kv_cache_bytes = int64_t{1} << 30;
  const SchedulingDefaults& d = cuda ? kGpuScheduling : kCpuScheduling;
  if (c.max_num_seqs == 0) c.max_num_seqs = d.max_num_seqs;
  if (c.max_num_batched_tokens == 0) c.max_num_batched_tokens = d.max_num_batched_tokens;
  if (c.prefill_chunk_size == 0) c.prefill_chunk_size = d.prefill_chunk_size;
  return c;
}

namespace {

Result<sched::SchedulerConfig> scheduler_config(const EngineConfig& c) {
  sched::SchedulerConfig s;
  s.max_num_seqs = c.max_num_seqs;
  s.max_num_batched_tokens = c.max_num_batched_tokens;
  s.prefill_chunk_size = c.prefill_chunk_size;
  s.max_prefill_batches_before_decode = c.max_prefill_batches_before_decode;
  s.admission_scan_limit = c.admission_scan_limit;
  s.max_admission_bypasses = c.max_admission_bypasses;
  s.mode = c.batch_mode;
  s.policy = c.policy;
  s.exit_mode = c.exit_policy;
  s.incremental_kv = c.incremental_kv;
  s.enable_preemption = c.enable_preemption;
  s.preemption_host_bytes = c.preemption_host_bytes;
  s.async_scheduling = c.async_scheduling;
  s.speculative = c.speculative;
  RLT_RETURN_IF_ERROR(s.validate());
  return s;
}

// Engine-wide speculation this model can never verify exactly is refused at startup (requests
// with settings of their own are checked as they come: sched::Scheduler::add_request).
Status check_speculation(const EngineConfig& c, int64_t depth, bool cuda) {
  const SpeculativeConfig& s = c.speculative;
  if (s.method == SpeculativeMethod::kOff) return {};
  if (s.method == SpeculativeMethod::kSelf && s.draft_loops >= depth) {
    return invalid_argument(fmt::format("--draft-loops must be below the model's depth {} (0: half of it), got {}",
                                        depth, s.draft_loops));
  }
  if (c.kv_layout == KVLayout::kShared && depth > 1) {
    return invalid_argument(
        "speculative decoding verifies several positions loop by loop; the shared KV layout overwrites a "
        "position's K/V every loop, so a later position would read the wrong loop's: use --kv-layout "
        "last_exited or drop --speculative-method");
  }
  if (cuda) {
    log_warn("speculative decoding on a GPU: a verification runs its rows through the multi-row kernels (cuBLAS, "
             "packed attention) where plain decoding runs one row (rlt's GEMV), so its tokens match plain "
             "decoding's except where those kernels' rounding differs at a near-tie (on the CPU they are "
             "identical)");
  }
  return {};
}

}  // namespace

// Per-request state that lives outside the scheduler: the sampler's history and RNG, and the
// output processor's part — what was sampled since the request's last output (delta outputs:
// reported once, then dropped) and the detokenizer, the only one a request's text goes through.
struct LiveRequest {
  sampling::TokenHistory history;
  sampling::RngState rng;
  size_t emitted = 0;  // tokens already reported
  std::unique_ptr<tok::IncrementalDetokenizer> detokenizer;  // null without a tokenizer
  std::vector<TokenLogprobs> new_logprobs;
  std::vector<std::string> new_texts;
  // prompt_logprobs: entry p scores prompt token p + 1, filled as the prefill's chunks are
  // applied and reported with the request's first token.
  std::vector<TokenLogprobs> prompt_logprobs;
  bool prompt_logprobs_reported = false;
  // Structured output: the parse state, and the mask of the next token (filled when its CODA
  // batch is prepared, read when the row is sampled).
  std::unique_ptr<structured::GrammarMatcher> matcher;
  std::vector<uint64_t> allowed;
};

struct Engine::Impl : public sched::PreemptionHooks {
  EngineConfig config;
  std::shared_ptr<const model::OuroModel> model;
  std::unique_ptr<kv::KVCacheManager> kv;
  std::unique_ptr<runner::ModelRunner> runner;
  engine::InputPlanning planning;  // how batches become runner inputs
  runner::ModelInput input;        // the batch being submitted (its buffers reused)
  std::unique_ptr<sched::Scheduler> scheduler;
  std::vector<sampling::Sampler> samplers;  // one per OpenMP thread: rows are sampled in parallel
  std::unordered_map<uint64_t, LiveRequest> live;
  std::vector<RequestOutput> pending;  // final outputs of aborted requests, for the next step
  std::shared_ptr<const tok::Tokenizer> tokenizer;  // null when the folder has none
  attention::SelectionReport attention_report;
  std::string attention_json;
  int64_t generated_tokens = 0;
  int64_t loops_run = 0;
  // Structured output: the compiler over the tokenizer's vocabulary (built on first use, under
  // the mutex: front ends compile on their own threads), and the masks' cost.
  std::mutex compiler_mutex;
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler;
  int64_t constrained_tokens = 0;
  double mask_seconds = 0.0;
  // Asynchronous scheduling: submitted batches whose results are not applied yet, oldest first,
  // and the runner time their submission took.
  std::deque<sched::SchedulerOutput> in_flight;
  std::deque<double> in_flight_submit_seconds;
  int64_t batches_stepped = 0;     // batches step() has scheduled
  double last_batch_seconds = 0;  // the runner's time for the last batch applied
  int64_t lookahead_batches = 0;
  // VERIFY rows that could not be sampled: (request, why), aborted once the tokens before them
  // are applied.
  std::vector<std::pair<uint64_t, std::string>> verify_failures;
  // Device runners: the verify batches' device time counted so far (the cost model's input).
  DeviceStageTime verify_device_time;

  Result<kv::KVSnapshot> snapshot_kv(kv::RequestId id) override { return kv->snapshot(id, runner->storage()); }
  Status resume_kv(kv::RequestId id, const kv::KVSnapshot& snap) override {
    return kv->resume(id, snap, runner->storage());
  }

  // Moves the final outputs of aborted requests into `outputs`.
  void take_pending(std::vector<RequestOutput>& outputs) {
    for (auto& o : pending) outputs.push_back(std::move(o));
    pending.clear();
  }

  // What request `r` added since its last output (its tokens are never copied again).
  RequestOutput output_for(const sched::Request& r, LiveRequest& l) {
    RequestOutput o;
    o.request_id = r.id;
    o.prompt_tokens = r.prompt_len();
    const auto from = static_cast<int64_t>(std::min(l.emitted, r.output_tokens.size()));
    o.new_token_ids.assign(r.output_tokens.begin() + from, r.output_tokens.end());
    if (static_cast<int64_t>(r.exit_depths.size()) >= from)
      o.new_exit_depths.assign(r.exit_depths.begin() + from, r.exit_depths.end());
    o.new_logprobs = std::move(l.new_logprobs);
    l.new_logprobs.clear();
    if (r.params.prompt_logprobs && !l.prompt_logprobs_reported && !r.output_tokens.empty()) {
      o.prompt_logprobs = std::move(l.prompt_logprobs);
      l.prompt_logprobs_reported = true;
    }
    // One text per new token: apply() pushes a piece for every token it hands the scheduler.
    o.new_token_texts = std::move(l.new_texts);
    l.new_texts.clear();
    o.new_token_texts.resize(o.new_token_ids.size());
    for (const std::string& piece : o.new_token_texts) o.new_text += piece;
    if (l.detokenizer && r.finished()) o.final_text += l.detokenizer->flush();
    o.new_text += o.final_text;
    l.emitted = r.output_tokens.size();
    o.num_tokens = static_cast<int64_t>(r.output_tokens.size());
    o.finished = r.finished();
    o.finish_reason = std::string(sched::finish_reason_name(r.finish));
    return o;
  }

  // Aborts a request and queues its final output; `error` says why when the engine aborts it on
  // its own (a failed batch, a broken logits row), empty for a caller's cancel.
  Status abort_request(uint64_t id, const std::string& error);
  // Runs a step update's finalize copies on the runner's storage, then confirms them.
  Status finalize(const sched::StepUpdate& update);
  // Aborts the requests of a batch that failed to run (the others keep going).
  void fail_batch(const sched::SchedulerOutput& batch, const Status& why,
                  std::vector<RequestOutput>& outputs);
  // VERIFY: samples each request's rows in order with its own sampler state, keeping tokens while
  // they equal the drafts (the first that differs, or a bonus token after all of them, ends it).
  Status verify_tokens(const sched::SchedulerOutput& batch, const runner::BatchResult& result,
                       sched::RunnerOutput& ro);
  // Samples a CODA batch's tokens and applies a batch's results; outputs for the step.
  Status apply(const sched::SchedulerOutput& batch, runner::BatchResult& result,
               std::vector<RequestOutput>& outputs);
  // Files a PREFILL batch's prompt scores with their (still live) requests.
  Status apply_prompt_scores(const sched::SchedulerOutput& batch, std::vector<runner::PromptScore>& scores);
  Status no_progress_error() const;
  // Deferred packing (EngineConfig::defer_packing) between two batches.
  void pack_between_steps();
  // Builds `input` for `batch`: the runner's view of it, with CODA rows' sampling parameters,
  // uniforms and histories.
  Status prepare_input(const sched::SchedulerOutput& batch);
  // The structured-output masks of the next tokens of `rows` (in parallel).
  void fill_masks(const std::vector<LiveRequest*>& rows);
  Result<std::shared_ptr<const structured::CompiledGrammar>> compile_constraint(const StructuredOutputs& spec);
  // prepare_input, then submits `input` to the runner.
  Status submit(const sched::SchedulerOutput& batch);
  Status collect(uint64_t seq, runner::BatchResult* result);
  // Feeds a VERIFY batch's runner time to the scheduler's cost model (adaptive draft counts).
  void observe_cost(const sched::SchedulerOutput& batch, double seconds) {
    if (batch.stage != sched::Stage::kVerify) return;
    // A device runner's own timing of the batch where it has one: with asynchronous scheduling
    // the host's wait for a batch says little about what it cost.
    const DeviceStageTime device = runner->device_stage_times().verify;
    if (device.batches == verify_device_time.batches + 1) {
      seconds = (device.milliseconds - verify_device_time.milliseconds) / 1e3;
    }
    verify_device_time = device;
    scheduler->observe_verify_cost(batch.rows(), seconds);
  }
  double runner_seconds = 0.0;  // wall time inside the runner's submit and collect
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

namespace {

// The KV cache's bytes on a GPU when the user gave no size: what --gpu-memory-utilization leaves
// (engine/gpu_memory_plan.h), measured against the device's memory now.
Result<int64_t> gpu_kv_cache_bytes(const EngineConfig& config, int device,
                                   const model::OuroModel& model, const std::string& backend,
                                   int64_t bytes_per_block) {
  RLT_ASSIGN_OR_RETURN(runner::GpuMemoryInfo memory, runner::gpu_memory_info(device));
  int64_t weight_bytes = 0;
  for (const auto& [name, view] : model.checkpoint.tensors()) weight_bytes += static_cast<int64_t>(view.nbytes);
  const int64_t max_rows = std::max(config.max_num_batched_tokens, config.max_num_seqs);
  const engine::GpuMemoryNeeds needs = engine::estimate_gpu_memory_needs(
      model.config, weight_bytes, max_rows, max_logit_rows(config), backend == "cudnn");
  RLT_ASSIGN_OR_RETURN(engine::GpuKvPlan plan,
                       engine::plan_gpu_kv_cache(fmt::format("cuda:{}", device), memory.total, memory.free,
                                                 config.gpu_memory_utilization, needs, bytes_per_block));
  log_info(plan.summary);
  return plan.kv_bytes;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& requested,
                                               std::shared_ptr<const tok::Tokenizer> tokenizer) {
  // The device first: a wrong --device fails before the model is read.
  RLT_ASSIGN_OR_RETURN(runner::DeviceChoice device, runner::choose_device(requested.device));
  const EngineConfig config = with_device_defaults(requested);
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  if (config.threads > 0) omp_set_num_threads(config.threads);
  model::LoadOptions load = model::load_options(config);
  if (device.cuda && (load.bf16_activations || load.int8_activations)) {
    return invalid_argument(fmt::format(
        "--activation-dtype {} selects the CPU kernels' activations; GPU runs round activations to the "
        "weight type inside their GEMMs already: drop it with --device cuda",
        name(config.activation_dtype)));
  }
  load.pack_for_cpu = !device.cuda;  // the GPU uploads the checkpoint's tensors itself
  if (!device.cuda && config.num_kv_blocks <= 0) load.other_bytes = config.kv_cache_bytes;
  load.write_cache_in_background = true;  // the first token does not wait for the disk
  load.defer_packing = config.defer_packing;
  RLT_ASSIGN_OR_RETURN(source::ModelSource source, source::ModelSource::open(config.model));
  for (const std::string& note : source.notes()) log_warn(fmt::format("{}: {}", config.model, note));
  // What the model cannot do is refused before its weights are read.
  RLT_RETURN_IF_ERROR(model::check_model_capabilities(model::model_capabilities(source.config()), config));
  // The tokenizer before the weights: building it takes transient memory that would otherwise
  // stack on the packed weights' peak.
  if (config.detokenize && tokenizer) {
    impl->tokenizer = std::move(tokenizer);
  } else if (config.detokenize && source.has_tokenizer()) {
    auto built = source.tokenizer();
    // A tokenizer rlt cannot build only costs the outputs' text: token ids still work.
    if (built.ok()) {
      impl->tokenizer = *built;
    } else if (built.status().code() == ErrorCode::kUnimplemented) {
      log_warn(fmt::format("outputs carry token ids only (no text): {}", built.status().message()));
    } else {
      return built.status();
    }
  }
  RLT_ASSIGN_OR_RETURN(impl->model, model::load_ouro_model(source, load));
  for (const std::string& note : impl->model->load_notes) log_warn(fmt::format("{}: {}", config.model, note));
  if (!device.cuda) log_info(fmt::format("weights loaded in {}", impl->model->load_report.summary()));
  const io::ModelConfig& mc = impl->model->config;
  RLT_ASSIGN_OR_RETURN(sched::SchedulerConfig sc, scheduler_config(config));
  RLT_RETURN_IF_ERROR(check_speculation(config, mc.total_ut_steps, device.cuda));
  // What a token's CODA (and, for Huginn, its attending prelude and coda blocks) costs next to
  // one loop of the core (all stream their weights).
  if (const int64_t loop = impl->model->core_weight_bytes_per_loop(); loop > 0)
    sc.coda_loops = static_cast<double>(impl->model->lm_head_bytes() + impl->model->outer_block_bytes()) /
                    static_cast<double>(loop);
  const kv::KVLayout layout = config.kv_layout;
  // Quantized weights: a bf16 cache (as llama.cpp's f16 default: half the f32 bytes).
  const DType kv_dtype = resolve_kv_dtype(
      config.kv_dtype,
      impl->model->quantized_types().empty() ? impl->model->weight_dtype() : DType::kBF16);

  // Attention first: the chosen backend's constraints (page size, dtype) must hold before the
  // cache is sized.
  attention::SelectionInput sel;
  sel.requested = config.attention_backend;
  sel.device = device.attention_device;
  sel.kv_dtype = kv_dtype;
  sel.head_dim = static_cast<int32_t>(mc.head_dim);
  sel.page_size = config.block_size;
  sel.num_q_heads = static_cast<int32_t>(mc.num_heads);
  sel.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  sel.requirements.deterministic = config.require_deterministic_attention;
  sel.requirements.packed_prefill = config.require_packed_prefill;
  // On the CPU the host runs attention itself: only device backends can break asynchrony.
  sel.requirements.async_scheduling = config.async_scheduling && device.cuda;
  sel.requirements.cuda_graphs = config.cuda_graphs == CudaGraphs::kOn;
  if (config.programmatic_launch && !device.cuda) {
    return invalid_argument("programmatic dependent launch (--pdl) applies to GPU runs; this run is on the CPU: "
                            "use --device cuda or drop --pdl");
  }
  impl->attention_report = attention::select_attention_backend(sel);
  impl->attention_json = impl->attention_report.to_json();
  if (!impl->attention_report.status.ok()) return impl->attention_report.status;
  log_info(fmt::format("attention backend: {} ({})", impl->attention_report.selected, impl->attention_report.reason));
  const attention::BackendEntry* entry = attention::find_backend(impl->attention_report.selected);

  double kv_seconds = 0;
  kv::KVCacheConfig kc;
  kc.geometry.num_layers = static_cast<int32_t>(mc.num_layers);
  kc.geometry.block_size = config.block_size;
  kc.geometry.num_kv_heads = static_cast<int32_t>(mc.num_kv_heads);
  kc.geometry.head_dim = static_cast<int32_t>(mc.head_dim);
  kc.geometry.dtype = kv_dtype;
  int64_t blocks = config.num_kv_blocks;
  if (blocks <= 0) {
    kc.geometry.num_blocks = 1;
    int64_t kv_bytes = config.kv_cache_bytes;
    // The device pools hold one padding block besides the manager's (CudaKVStorage); a share
    // planned from the device's memory makes room for it.
    int64_t padding_blocks = 0;
    if (kv_bytes == 0) {
      RLT_ASSIGN_OR_RETURN(kv_bytes, gpu_kv_cache_bytes(config, device.cuda_index, *impl->model,
                                                        impl->attention_report.selected,
                                                        kc.geometry.bytes_per_block()));
      padding_blocks = 1;
    }
    blocks = kv_bytes / kc.geometry.bytes_per_block() - padding_blocks;
  }
  if (blocks < 1 || blocks > (int64_t{1} << 30)) {
    return invalid_argument(fmt::format("the KV cache would hold {} blocks of {} bytes; give it between one block "
                                        "and 2^30 blocks (--kv-cache-gib / --num-kv-blocks)", blocks,
                                        kc.geometry.bytes_per_block()));
  }
  kc.geometry.num_blocks = static_cast<int32_t>(blocks);
  kc.depth = static_cast<int32_t>(mc.total_ut_steps);
  kc.outer_planes = mc.recurrent_injection() ? model::outer_kv_planes(mc) : 0;
  // Attending readouts (Huginn's) stream a loop's worth of weights or more whatever their rows.
  sc.gather_exited_tokens = kc.outer_planes > 0 && sc.coda_loops >= 1.0;
  kc.layout = layout;
  kc.watermark_ratio = config.watermark;
  kc.enable_prefix_caching = config.enable_prefix_caching;
  kc.model_salt = config.model;
  RLT_ASSIGN_OR_RETURN(kv::KVCacheManager manager, kv::KVCacheManager::create(kc));
  impl->kv = std::make_unique<kv::KVCacheManager>(std::move(manager));
  if (device.cuda) {
    RLT_ASSIGN_OR_RETURN(
        impl->runner,
        runner::make_gpu_runner(impl->model, kc.geometry, device.cuda_index, entry->create(),
                                entry->caps, gpu_runner_settings(config)));
  } else {
    const auto kv_start = std::chrono::steady_clock::now();
    RLT_ASSIGN_OR_RETURN(auto storage, kv::CpuKVStorage::create(kc.geometry));
    kv_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - kv_start).count();
    impl->runner = std::make_unique<runner::CpuModelRunner>(impl->model, std::move(storage), entry->create(),
                                                            omp_get_max_threads(), config.adaptive_threads);
  }
  impl->planning = {layout, entry->caps.packed_prefill, kc.depth, kc.outer_planes};
  std::vector<int32_t> eos;
  for (int64_t id : impl->model->eos_token_ids()) eos.push_back(static_cast<int32_t>(id));
  impl->scheduler = std::make_unique<sched::Scheduler>(sc, *impl->kv, kc.depth, eos, impl.get());
  log_info(fmt::format("kv cache: {} blocks of {} tokens ({} layout, {}), {:.1f} MiB",
                       kc.geometry.num_blocks, kc.geometry.block_size, name(config.kv_layout),
                       dtype_name(kv_dtype),
                       static_cast<double>(kc.geometry.num_blocks) *
                           static_cast<double>(kc.geometry.bytes_per_block()) / (1 << 20)));
  if (!device.cuda) {
    // The pools come from the kernel's zero pages: resident only as requests fill them.
    const ProcessMemory mem = process_memory();
    log_info(fmt::format("kv cache allocated in {:.3f} s; resident now {} (file-mapped {}, own {}), "
                         "peak {}",
                         kv_seconds, format_bytes(mem.resident), format_bytes(mem.resident_file),
                         format_bytes(mem.resident_anon), format_bytes(mem.peak_resident)));
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<std::shared_ptr<const structured::CompiledGrammar>> Engine::Impl::compile_constraint(
    const StructuredOutputs& spec) {
  structured::GrammarCompiler* compiler = nullptr;
  {
    std::lock_guard lock(compiler_mutex);
    if (!grammar_compiler) {
      if (!tokenizer) {
        return failed_precondition(
            "structured output needs the model's tokenizer (to know each token's bytes); this engine has none: "
            "serve a model folder or GGUF file that includes one");
      }
      auto vocab = std::make_shared<const structured::TokenVocabulary>(
          tok::token_byte_strings(*tokenizer), static_cast<size_t>(model->config.vocab_size));
      grammar_compiler = std::make_unique<structured::GrammarCompiler>(std::move(vocab));
    }
    compiler = grammar_compiler.get();
  }
  return compiler->compile(spec);
}

Status Engine::prepare_structured_outputs(const StructuredOutputs& spec) const {
  return impl_->compile_constraint(spec).status();
}

Status Engine::add_request(uint64_t id, std::vector<int32_t> prompt, const SamplingParams& params,
                           std::vector<int32_t> exit_trace) {
  Impl& m = *impl_;
  const io::ModelConfig& mc = m.model->config;
  RLT_RETURN_IF_ERROR(params.validate(mc.vocab_size));
  for (int32_t t : prompt) {
    if (t < 0 || t >= mc.vocab_size)
      return invalid_argument(fmt::format("prompt token id {} is outside the vocabulary [0, {})", t, mc.vocab_size));
  }
  // Compared without the sum, which a max_tokens near 2^63 would overflow.
  if (params.max_tokens > mc.max_position_embeddings - static_cast<int64_t>(prompt.size()) + 1) {
    return invalid_argument(fmt::format("prompt ({} tokens) + max_tokens ({}) - 1 exceeds the model's "
                                        "max_position_embeddings ({})", prompt.size(), params.max_tokens,
                                        mc.max_position_embeddings));
  }
  RLT_ASSIGN_OR_RETURN(model::ExitParams exit,
                       model::resolve_exit_params({params.min_loops, params.max_loops, params.exit_threshold,
                                                   params.exit_criterion, params.exit_criterion_threshold},
                                                  mc.total_ut_steps));
  // A request's own speculation, against what the model supports (the engine's default was
  // checked at startup).
  if (params.speculative && params.speculative->method && *params.speculative->method != SpeculativeMethod::kOff) {
    const model::ModelFeature feature = *params.speculative->method == SpeculativeMethod::kNgram
                                            ? model::ModelFeature::kSpeculativeNgram
                                            : model::ModelFeature::kSpeculativeSelf;
    const model::ModelCapabilities caps = model::model_capabilities(mc);
    if (!caps.supports(feature)) {
      const bool ngram = caps.supports(model::ModelFeature::kSpeculativeNgram);
      return unimplemented(fmt::format("speculative {}: this {} model does not support it ({}); {}",
                                       name(*params.speculative->method), caps.architecture, caps.get(feature).why,
                                       ngram ? "use speculative method ngram" : "drop speculative"));
    }
  }
  if (exit.criterion != model::ExitCriterion::kGate && !mc.recurrent_injection()) {
    return unimplemented(fmt::format("exit_criterion {} is one of Huginn's criteria; this {} model exits by its "
                                     "gate (exit_criterion gate, with exit_threshold)",
                                     rlt::name(exit.criterion), mc.model_type));
  }
  // Without an exit gate (a GGUF from llama.cpp's converter) there is nothing to exit on: every
  // token runs to max_loops.
  if (!mc.has_exit_gate()) exit.threshold = 1.0;
  if (params.prompt_logprobs && !m.runner->scores_prompts()) {
    return unimplemented(fmt::format("prompt logprobs (echo with logprobs, prompt_logprobs, rlt perplexity) are "
                                     "computed by the CPU runner only; this engine runs on {}: drop them, run with "
                                     "--device cpu, or for rlt perplexity add --reference",
                                     m.config.device));
  }
  if (m.live.count(id)) return already_exists(fmt::format("request id {} is already live", id));
  sched::Request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.params = params;
  r.exit = exit;
  r.exit_trace = std::move(exit_trace);
  LiveRequest l;
  if (params.structured_outputs) {
    RLT_ASSIGN_OR_RETURN(auto grammar, m.compile_constraint(*params.structured_outputs));
    // The output may end where the grammar does: on the model's end-of-sequence ids and the
    // request's stop ids.
    std::vector<int32_t> terminators = params.stop_token_ids;
    for (int64_t e : m.model->eos_token_ids()) terminators.push_back(static_cast<int32_t>(e));
    l.matcher = std::make_unique<structured::GrammarMatcher>(std::move(grammar), std::move(terminators));
    l.allowed.assign(l.matcher->mask_words(), 0);
  }
  l.history = sampling::TokenHistory(r.prompt);
  const uint64_t seed =
      params.seed ? *params.seed : sampling::derive_request_seed(m.config.seed, std::to_string(id));
  l.rng = sampling::RngState::from_seed(seed);
  r.seed = seed;
  if (m.tokenizer) l.detokenizer = std::make_unique<tok::IncrementalDetokenizer>(m.tokenizer, /*skip_special_tokens=*/true);
  RLT_RETURN_IF_ERROR(m.scheduler->add_request(std::move(r)));
  m.live.emplace(id, std::move(l));
  return {};
}

Status Engine::abort(uint64_t id) { return impl_->abort_request(id, ""); }

Status Engine::Impl::abort_request(uint64_t id, const std::string& error) {
  RLT_RETURN_IF_ERROR(scheduler->abort(id));
  auto r = scheduler->take_finished(id);
  auto it = live.find(id);
  if (r && it != live.end()) {
    pending.push_back(output_for(*r, it->second));
    pending.back().error = error;
  }
  live.erase(id);
  runner->release(id);
  return {};
}

bool Engine::has_unfinished() const {
  return impl_->scheduler->has_unfinished() || !impl_->pending.empty() || !impl_->in_flight.empty();
}

Status Engine::Impl::finalize(const sched::StepUpdate& update) {
  if (!update.finalize_copies.empty()) RLT_RETURN_IF_ERROR(runner->storage().copy_slots(update.finalize_copies));
  return scheduler->confirm_finalized(update.exited);
}

void Engine::Impl::fail_batch(const sched::SchedulerOutput& batch, const Status& why,
                              std::vector<RequestOutput>& outputs) {
  // A failed batch aborts only its own requests; the engine keeps serving the others.
  log_error(fmt::format("batch {} ({}) failed, aborting its requests: {}", batch.seq, sched::stage_name(batch.stage),
                        why.to_string()));
  for (const auto& item : batch.items) {
    // Only the requests the batch ran for: an id may have been cancelled and reused meanwhile.
    const sched::Request* r = scheduler->find(item.id);
    if (r != nullptr && r->arrival == item.arrival) {
      // Queues its final output, which says why.
      (void)abort_request(item.id, fmt::format("batch {} ({}) failed: {}", batch.seq, sched::stage_name(batch.stage),
                                               why.message()));
    }
  }
  take_pending(outputs);
}

Status Engine::Impl::apply(const sched::SchedulerOutput& batch, runner::BatchResult& result,
                           std::vector<RequestOutput>& outputs) {
  sched::RunnerOutput ro;
  ro.seq = batch.seq;
  ro.stage = batch.stage;
  ro.gate_logits = std::move(result.gate_logits);
  ro.exit_values = std::move(result.exit_values);
  if (!result.prompt_scores.empty()) RLT_RETURN_IF_ERROR(apply_prompt_scores(batch, result.prompt_scores));
  if (batch.stage == sched::Stage::kCoda) {
    const int64_t vocab = model->config.vocab_size;
    if (!result.device_tokens.empty() && result.device_tokens.size() != batch.items.size()) {
      return internal_error(fmt::format("the runner sampled {} tokens for a batch of {}", result.device_tokens.size(),
                                        batch.items.size()));
    }
    // Rows of requests cancelled while the batch ran stay null and are never read.
    const size_t n = batch.items.size();
    std::vector<const sched::Request*> requests(n, nullptr);
    std::vector<LiveRequest*> states(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      const sched::Request* r = scheduler->find(batch.items[i].id);
      auto it = live.find(batch.items[i].id);
      if (r == nullptr || r->finished() || r->arrival != batch.items[i].arrival || it == live.end()) continue;
      requests[i] = r;
      states[i] = &it->second;
    }
    std::vector<Result<sampling::SampledToken>> sampled;
    sampled.reserve(n);
    for (size_t i = 0; i < n; ++i) sampled.push_back(internal_error("not sampled"));
    if (!result.device_tokens.empty()) {
      // Sampled on the device by the sampler's rules at this token's uniform; the RNG advances.
      for (size_t i = 0; i < n; ++i) {
        if (states[i] == nullptr) continue;
        if (result.device_tokens[i] < 0) {
          sampled[i] = invalid_argument(result.device_sample_errors[i]);
        } else {
          sampling::SampledToken t;
          if (requests[i]->spec.drafting) {
            t.token = result.device_tokens[i];
            sampled[i] = t;
            continue;
          }
          states[i]->rng.advance();
          if (requests[i]->params.logprobs) {
            if (result.device_logprobs.size() != n) {
              sampled[i] = internal_error("the runner sampled on its device without the logprobs asked for");
              continue;
            }
            t = result.device_logprobs[i];
          }
          t.token = result.device_tokens[i];
          sampled[i] = t;
        }
      }
    } else {
      // Rows are independent (each request's own history and counter-based RNG), so they are
      // sampled in parallel with identical results; a large batch of sampled rows would
      // otherwise cost milliseconds per step on one core.
      const std::span<const float> logits = result.all_logits();
      samplers.resize(static_cast<size_t>(std::max(1, omp_get_max_threads())));
#pragma omp parallel for schedule(dynamic) if (n > 1)
      for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
        const auto row = static_cast<size_t>(i);
        if (states[row] == nullptr) continue;
        sampling::Sampler& sampler =
            samplers[static_cast<size_t>(omp_get_thread_num()) % samplers.size()];
        const auto row_logits = logits.subspan(row * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
        LiveRequest& l = *states[row];
        if (requests[row]->spec.drafting) {
          sampling::RngState rng = draft_rng(l.rng, *requests[row]);  // a copy: nothing advances
          sampled[row] = sampler.sample(row_logits, requests[row]->params, l.history, rng, {});
          continue;
        }
        sampled[row] = sampler.sample(row_logits, requests[row]->params, l.history, l.rng,
                                      l.matcher ? std::span<const uint64_t>(l.allowed) : std::span<const uint64_t>());
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const uint64_t id = batch.items[i].id;
      if (states[i] == nullptr) {
        ro.sampled.push_back(-1);  // aborted while the batch ran: never read
        continue;
      }
      if (!sampled[i].ok() && requests[i]->spec.drafting) {
        // A draft that cannot be sampled ends the draft cycle, not the request: plain decoding
        // never samples that row.
        ro.sampled.push_back(-1);
        continue;
      }
      if (!sampled[i].ok()) {
        // A broken logits row (NaN, inf) ends that request only.
        log_error(fmt::format("request {}: sampling failed, aborting it: {}", id, sampled[i].status().to_string()));
        ro.sampled.push_back(-1);  // never read: the request is gone before results are applied
        (void)abort_request(id, "sampling failed: " + sampled[i].status().message());  // queues its final output
        continue;
      }
      LiveRequest& l = *states[i];
      const sampling::SampledToken& st = *sampled[i];
      if (requests[i]->spec.drafting) {
        ro.sampled.push_back(st.token);  // a proposal: no history, text or logprobs until verified
        continue;
      }
      if (l.matcher && !l.matcher->accept_token(st.token)) {
        // Ends this request only: a grammar too ambiguous to follow, or (the mask allowed the
        // token) a bug.
        ro.sampled.push_back(-1);
        (void)abort_request(id, l.matcher->overflowed()
                                    ? "the structured-output grammar is too ambiguous to follow here (more than "
                                      "4,096 parse stacks); simplify it"
                                    : fmt::format("internal error: token {} broke the structured-output constraint",
                                                  st.token));
        continue;
      }
      ro.sampled.push_back(st.token);
      l.history.append(st.token);
      l.new_texts.push_back(l.detokenizer ? l.detokenizer->push(st.token) : std::string());
      if (requests[i]->params.logprobs) {
        TokenLogprobs lp{st.token, st.logprob, {}, 0};
        for (const auto& t : st.top_logprobs) lp.top.push_back(TokenLogprob{t.token, t.logprob});
        l.new_logprobs.push_back(std::move(lp));
      }
    }
  }
  if (batch.stage == sched::Stage::kVerify) RLT_RETURN_IF_ERROR(verify_tokens(batch, result, ro));
  take_pending(outputs);
  RLT_ASSIGN_OR_RETURN(sched::StepUpdate update, scheduler->update_from_output(batch, ro));
  RLT_RETURN_IF_ERROR(finalize(update));
  for (uint64_t id : update.new_tokens) {
    const sched::Request* r = scheduler->find(id);
    auto it = live.find(id);
    if (r == nullptr || it == live.end()) continue;
    // A verification may add several tokens at once.
    for (size_t t = std::min(it->second.emitted, r->output_tokens.size()); t < r->output_tokens.size(); ++t) {
      ++generated_tokens;
      loops_run += r->exit_depths[t];
    }
    if (r->finished()) continue;  // reported below with its final state
    outputs.push_back(output_for(*r, live.at(id)));
  }
  for (uint64_t id : update.finished) {
    auto r = scheduler->take_finished(id);
    if (!r) continue;
    outputs.push_back(output_for(*r, live.at(id)));
    live.erase(id);
    runner->release(id);
  }
  for (auto& [id, why] : verify_failures) {
    if (!live.count(id)) continue;  // it stopped on its last good token
    log_error(fmt::format("request {}: {}; aborting it", id, why));
    (void)abort_request(id, why);  // its tokens before the failure went out above
  }
  verify_failures.clear();
  take_pending(outputs);
  return {};
}

Status Engine::Impl::verify_tokens(const sched::SchedulerOutput& batch, const runner::BatchResult& result,
                                   sched::RunnerOutput& ro) {
  const auto vocab = static_cast<size_t>(model->config.vocab_size);
  const size_t n = batch.items.size();
  std::vector<size_t> first_row(n);
  size_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    first_row[i] = rows;
    rows += static_cast<size_t>(batch.items[i].token_count);
  }
  const std::span<const float> logits = result.all_logits();
  if (logits.size() != rows * vocab)
    return internal_error(fmt::format("a verification of {} rows got {} logits", rows, logits.size()));
  // Per item: the tokens kept, and why the request must end instead (a broken row, a grammar).
  struct Verified {
    std::vector<int32_t> tokens;
    std::string failure;
    int64_t constrained = 0;
    double mask_seconds = 0;
  };
  std::vector<Verified> verified(n);
  const double forced = config.speculative.forced_acceptance;
  samplers.resize(static_cast<size_t>(std::max(1, omp_get_max_threads())));
  // Requests are independent (each its own history, RNG and matcher); a request's rows are not.
#pragma omp parallel for schedule(dynamic) if (n > 1)
  for (int64_t item = 0; item < static_cast<int64_t>(n); ++item) {
    const auto i = static_cast<size_t>(item);
    const sched::ScheduledItem& it = batch.items[i];
    const sched::Request* r = scheduler->find(it.id);
    auto found = live.find(it.id);
    if (r == nullptr || r->finished() || r->arrival != it.arrival || found == live.end()) continue;
    LiveRequest& l = found->second;
    Verified& v = verified[i];
    sampling::Sampler& sampler = samplers[static_cast<size_t>(omp_get_thread_num()) % samplers.size()];
    for (int32_t j = 0; j < it.token_count; ++j) {
      std::span<const uint64_t> allowed;
      if (l.matcher) {
        const auto start = std::chrono::steady_clock::now();
        l.matcher->fill_next_token_mask(l.allowed);
        v.mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ++v.constrained;
        allowed = l.allowed;
      }
      // The row's token is exactly what plain decoding samples here: the same logits, history and
      // uniform (the counter of this output position).
      const auto row = logits.subspan((first_row[i] + static_cast<size_t>(j)) * vocab, vocab);
      Result<sampling::SampledToken> st = sampler.sample(row, r->params, l.history, l.rng, allowed);
      if (!st.ok()) {
        v.failure = "sampling failed: " + st.status().message();
        break;
      }
      int32_t token = st->token;
      // Benchmarks (--speculative-forced-acceptance): the draft is kept with the forced
      // probability whatever the model says.
      const bool forced_draft =
          forced > 0 && j + 1 < it.token_count && forced_keep(r->id, it.position + j, forced);
      if (forced_draft) token = r->spec.drafts[static_cast<size_t>(j)];
      if (l.matcher && !l.matcher->accept_token(token)) {
        v.failure = l.matcher->overflowed()
                        ? "the structured-output grammar is too ambiguous to follow here (more than 4,096 parse "
                          "stacks); simplify it"
                        : fmt::format("internal error: token {} broke the structured-output constraint", token);
        break;
      }
      v.tokens.push_back(token);
      l.history.append(token);
      l.new_texts.push_back(l.detokenizer ? l.detokenizer->push(token) : std::string());
      if (r->params.logprobs) {
        TokenLogprobs lp{token, st->logprob, {}, 0};
        for (const auto& t : st->top_logprobs) lp.top.push_back(TokenLogprob{t.token, t.logprob});
        l.new_logprobs.push_back(std::move(lp));
      }
      const bool last_row = j + 1 == it.token_count;
      if (last_row || scheduler->stops(*r, token)) break;
      if (forced > 0 ? !forced_draft : token != r->spec.drafts[static_cast<size_t>(j)]) break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    Verified& v = verified[i];
    constrained_tokens += v.constrained;
    mask_seconds += v.mask_seconds;
    // The tokens before a failing row are what plain decoding emitted before failing there: they
    // are applied, then the request ends (apply() aborts it with the reason).
    if (!v.failure.empty()) verify_failures.emplace_back(batch.items[i].id, std::move(v.failure));
    ro.emitted.push_back(static_cast<int32_t>(v.tokens.size()));
    ro.sampled.insert(ro.sampled.end(), v.tokens.begin(), v.tokens.end());
  }
  return {};
}

Status Engine::Impl::apply_prompt_scores(const sched::SchedulerOutput& batch,
                                         std::vector<runner::PromptScore>& scores) {
  for (runner::PromptScore& s : scores) {
    // Only for the request the batch ran for: an id may have been cancelled and reused meanwhile.
    const auto item = std::find_if(batch.items.begin(), batch.items.end(),
                                   [&](const sched::ScheduledItem& i) { return i.id == s.request; });
    const sched::Request* r = scheduler->find(s.request);
    auto it = live.find(s.request);
    if (item == batch.items.end() || r == nullptr || r->arrival != item->arrival || it == live.end()) continue;
    if (s.position < 0 || s.position + 1 >= r->prompt_len())
      return internal_error(fmt::format("a prompt score of request {} at position {} (prompt of {})", s.request,
                                        s.position, r->prompt_len()));
    if (!s.error.empty()) {
      // A broken logits row ends that request only, as in sampling.
      log_error(fmt::format("request {}: prompt logprobs failed, aborting it: {}", s.request, s.error));
      (void)abort_request(s.request, "prompt logprobs failed: " + s.error);  // queues its final output
      continue;
    }
    std::vector<TokenLogprobs>& lp = it->second.prompt_logprobs;
    lp.resize(static_cast<size_t>(r->prompt_len() - 1));
    TokenLogprobs& out = lp[static_cast<size_t>(s.position)];
    out = {s.scored.token.token, s.scored.token.logprob, {}, s.scored.rank};
    for (const auto& t : s.scored.token.top_logprobs) out.top.push_back(TokenLogprob{t.token, t.logprob});
  }
  return {};
}

Status Engine::Impl::prepare_input(const sched::SchedulerOutput& batch) {
  RLT_RETURN_IF_ERROR(engine::build_model_input(batch, *scheduler, *kv, planning, input));
  if (batch.stage != sched::Stage::kCoda) return {};
  std::vector<LiveRequest*> constrained;
  // The counter advances when the token is applied, and a request has at most one CODA in
  // flight, so this is the uniform the host sampler would draw.
  for (const auto& item : batch.items) {
    auto it = live.find(item.id);
    const sched::Request* r = scheduler->find(item.id);  // the builder checked it exists
    if (it == live.end() || r == nullptr) {
      input.sampling.push_back({});
    } else {
      // The mask's buffer is sized once at add_request; fill_masks writes it below.
      LiveRequest& l = it->second;
      if (r->spec.drafting) {
        // A self draft: sampled at the uniform its position's token will use (so that it agrees
        // with the target as often as the distributions allow), unconstrained, nothing advanced.
        input.sampling.push_back({&r->params, &l.history, draft_rng(l.rng, *r).uniform(), {}});
        continue;
      }
      const std::span<const uint64_t> allowed = l.matcher ? std::span<const uint64_t>(l.allowed) : std::span<const uint64_t>();
      input.sampling.push_back({&r->params, &l.history, l.rng.uniform(), allowed});
      if (l.matcher) constrained.push_back(&l);
    }
  }
  fill_masks(constrained);
  return {};
}

void Engine::Impl::fill_masks(const std::vector<LiveRequest*>& rows) {
  if (rows.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  // Each matcher is its own request's; the compiled grammars they share are thread-safe.
#pragma omp parallel for schedule(dynamic) if (rows.size() > 1)
  for (size_t i = 0; i < rows.size(); ++i) rows[i]->matcher->fill_next_token_mask(rows[i]->allowed);
  mask_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  constrained_tokens += static_cast<int64_t>(rows.size());
}

namespace {

// Runs `call` and adds its wall time to `seconds`.
template <typename Call>
Status timed(double& seconds, Call call) {
  const auto start = std::chrono::steady_clock::now();
  Status s = call();
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace

Status Engine::Impl::submit(const sched::SchedulerOutput& batch) {
  RLT_RETURN_IF_ERROR(prepare_input(batch));
  return timed(runner_seconds, [&] { return runner->submit(input); });
}

Status Engine::Impl::collect(uint64_t seq, runner::BatchResult* result) {
  return timed(runner_seconds, [&] { return runner->collect(seq, result); });
}

Status Engine::Impl::no_progress_error() const {
  return internal_error(fmt::format("the scheduler made no progress: {} waiting, {} running, {} of {} KV blocks free",
                                    scheduler->num_waiting(), scheduler->num_running(), kv->num_available_blocks(),
                                    kv->num_blocks()));
}

bool Engine::has_idle_work() const {
  const auto& packing = impl_->model->deferred_packing;
  return packing && packing->pending();
}

// Deferred packing is for CPU runs only, whose runner computes a batch inside submit(): between
// two calls of the engine no forward pass is running, asynchronous scheduling or not, so packing
// never competes with one for the cores.
void Engine::do_idle_work() {
  if (has_idle_work()) impl_->model->deferred_packing->pack_next();
}

void Engine::Impl::pack_between_steps() {
  model::DeferredPacking* packing = model->deferred_packing.get();
  if (packing == nullptr || !packing->pending() || batches_stepped == 0) return;
  // One step (the lm head or a layer), and more while within half the last batch's runner time:
  // the packed speed comes within a few batches, and no batch waits much more than a step's
  // packing.
  const double budget = 0.5 * last_batch_seconds;
  const auto start = std::chrono::steady_clock::now();
  do {
    packing->pack_next();
  } while (packing->pending() &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget);
}

Result<std::vector<RequestOutput>> Engine::step() {
  Impl& m = *impl_;
  // Deferred packing before each batch but the engine's first: a first start's first token never
  // waits for it.
  m.pack_between_steps();
  std::vector<RequestOutput> outputs;
  m.take_pending(outputs);
  RLT_ASSIGN_OR_RETURN(std::optional<sched::SchedulerOutput> batch, m.scheduler->schedule());
  if (batch) ++m.batches_stepped;
  if (!m.config.async_scheduling) {
    if (!batch) {
      if (outputs.empty() && m.scheduler->has_unfinished()) return m.no_progress_error();
      return outputs;
    }
    runner::BatchResult result;
    const double runner_before = m.runner_seconds;
    Status ran = m.submit(*batch);
    if (ran.ok()) ran = m.collect(batch->seq, &result);
    if (!ran.ok()) {
      m.fail_batch(*batch, ran, outputs);
      return outputs;
    }
    m.last_batch_seconds = m.runner_seconds - runner_before;
    m.observe_cost(*batch, m.last_batch_seconds);
    RLT_RETURN_IF_ERROR(m.apply(*batch, result, outputs));
    return outputs;
  }
  // Asynchronous: submit this batch, then apply the one before it while this one runs. The
  // scheduler already moved this batch's requests on as far as their results are not needed.
  bool submitted = false;
  if (batch) {
    const double runner_before = m.runner_seconds;
    Status sent = m.submit(*batch);
    if (sent.ok()) {
      // Tracked first: the runner holds it now, whatever happens below.
      submitted = true;
      if (!m.in_flight.empty()) ++m.lookahead_batches;
      m.in_flight.push_back(std::move(*batch));
      m.in_flight_submit_seconds.push_back(m.runner_seconds - runner_before);
      RLT_ASSIGN_OR_RETURN(sched::StepUpdate update, m.scheduler->on_submitted(m.in_flight.back()));
      RLT_RETURN_IF_ERROR(m.finalize(update));
    } else {
      m.fail_batch(*batch, sent, outputs);
    }
  }
  const size_t keep = submitted ? 1 : 0;
  bool collected = false;
  while (m.in_flight.size() > keep) {
    collected = true;
    const sched::SchedulerOutput done = std::move(m.in_flight.front());
    m.in_flight.pop_front();
    const double submit_seconds = m.in_flight_submit_seconds.front();
    m.in_flight_submit_seconds.pop_front();
    runner::BatchResult result;
    const double runner_before = m.runner_seconds;
    Status ran = m.collect(done.seq, &result);
    if (!ran.ok()) {
      m.fail_batch(done, ran, outputs);
      continue;
    }
    m.last_batch_seconds = submit_seconds + m.runner_seconds - runner_before;
    m.observe_cost(done, m.last_batch_seconds);
    RLT_RETURN_IF_ERROR(m.apply(done, result, outputs));
  }
  // Nothing ran and nothing came back: only then is the scheduler stuck.
  if (!batch && !collected && outputs.empty() && m.scheduler->has_unfinished()) {
    return m.no_progress_error();
  }
  return outputs;
}

void RequestResult::append(const RequestOutput& o) {
  request_id = o.request_id;
  token_ids.insert(token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  exit_depths.insert(exit_depths.end(), o.new_exit_depths.begin(), o.new_exit_depths.end());
  logprobs.insert(logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  prompt_logprobs.insert(prompt_logprobs.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
  text += o.new_text;
  finished = o.finished;
  finish_reason = o.finish_reason;
  error = o.error;
  prompt_tokens = o.prompt_tokens;
}

const std::string& Engine::attention_info() const { return impl_->attention_json; }
std::string Engine::attention_backend() const { return impl_->attention_report.selected; }
int64_t Engine::vocab_size() const { return impl_->model->config.vocab_size; }
int64_t Engine::total_loops() const { return impl_->model->config.total_ut_steps; }

ModelFootprint Engine::footprint() const {
  const model::OuroModel& m = *impl_->model;
  ModelFootprint f;
  f.core_weight_bytes_per_loop = m.core_weight_bytes_per_loop();
  f.lm_head_bytes = m.lm_head_bytes();
  f.kv_bytes_per_token_per_loop = kv::kv_value_bytes(impl_->kv->config().geometry.dtype,
                                                     m.config.kv_values_per_token_per_depth());
  f.loops = m.config.total_ut_steps;
  f.kernel_target = kernels::cpu_dispatch_target();
  f.activation_dtype = std::string(name(impl_->config.activation_dtype));
  f.threads = omp_get_max_threads();
  f.device = impl_->config.device == "cuda" ? "cuda:0" : impl_->config.device;
  return f;
}
std::shared_ptr<const tok::Tokenizer> Engine::tokenizer() const { return impl_->tokenizer; }

std::vector<int32_t> Engine::eos_token_ids() const {
  std::vector<int32_t> out;
  for (int64_t id : impl_->model->eos_token_ids()) out.push_back(static_cast<int32_t>(id));
  return out;
}

EngineMetrics Engine::metrics() const {
  const Impl& m = *impl_;
  EngineMetrics x;
  x.waiting = m.scheduler->num_waiting();
  x.running = m.scheduler->num_running();
  x.suspended = m.scheduler->num_suspended();
  x.kv_total_blocks = m.kv->num_blocks();
  x.kv_used_blocks = m.kv->num_used_blocks();
  x.kv_usage = x.kv_total_blocks ? static_cast<double>(x.kv_used_blocks) / x.kv_total_blocks : 0.0;
  x.prefix_queries = static_cast<int64_t>(m.kv->prefix_stats().query_pages);
  x.prefix_hits = static_cast<int64_t>(m.kv->prefix_stats().hit_pages);
  x.generated_tokens = m.generated_tokens;
  x.loops_run = m.loops_run;
  x.mean_loops_per_token = m.generated_tokens ? static_cast<double>(m.loops_run) / static_cast<double>(m.generated_tokens) : 0.0;
  x.preemptions = m.scheduler->counters().preemptions;
  x.batches = m.scheduler->counters().batches;
  x.recurrent_batches = m.scheduler->counters().recurrent_batches;
  x.mixed_depth_batches = m.scheduler->counters().mixed_depth_batches;
  x.cuda_graph_replays = m.runner->graph_replays();
  x.device_sampled_batches = m.runner->device_sampled_batches();
  x.device_time = m.runner->device_stage_times();
  x.lookahead_batches = m.lookahead_batches;
  x.attention_seconds = m.runner->attention_seconds();
  x.runner_seconds = m.runner_seconds;
  x.cpu_threads = m.runner->cpu_threads();
  x.reduced_thread_batches = m.runner->reduced_thread_batches();
  x.constrained_tokens = m.constrained_tokens;
  x.mask_seconds = m.mask_seconds;
  const sched::SchedulerCounters& c = m.scheduler->counters();
  x.spec_verifications = c.verifications;
  x.spec_draft_tokens = c.draft_tokens;
  x.spec_accepted_tokens = c.accepted_tokens;
  x.spec_verified_tokens = c.verified_tokens;
  if (const spec::VerifyCostModel& cost = m.scheduler->verify_cost(); !cost.needs_variation()) {
    x.spec_verify_fixed_seconds = cost.fixed();
    x.spec_verify_row_seconds = cost.per_row();
  }
  return x;
}

}  // namespace rlt
