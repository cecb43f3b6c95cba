#include "runner/gpu_model_runner.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "common/log.h"
#include "cuda/device.h"
#include "cuda/element_type.h"
#include "cuda/model_kernels.h"
#include "cuda/programmatic_launch.h"
#include "runner/cuda_check.h"
#include "sampling/device_rows.h"
#include "sampling/sampler.h"

namespace rlt::runner {
namespace {

float* floats(cuda::DeviceAllocation& a) {
  return static_cast<float*>(a.data());
}

int64_t next_power_of_two(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Largest recurrent batch run as a graph; bigger batches run eagerly.
constexpr int64_t kMaxGraphRows = 1024;

// Programmatic dependent launch is safe only where the kernels wait for their producers, which
// needs sm_90+ hardware running code built for sm_90+.
Status check_programmatic_launch(int device) {
  const cuda::DeviceList list = cuda::list_devices();
  const auto d = std::find_if(list.devices.begin(), list.devices.end(),
                              [&](const cuda::DeviceInfo& info) { return info.index == device; });
  if (d == list.devices.end()) {
    return failed_precondition(
        fmt::format("programmatic dependent launch (--pdl): CUDA device {} is not usable ({})",
                    device, list.why_none.empty() ? "not listed" : list.why_none));
  }
  if (d->compute_major < 9) {
    return failed_precondition(fmt::format(
        "programmatic dependent launch (--pdl) needs a GPU of compute capability 9.0 or newer; "
        "device {} ({}) is sm_{}{}: run without --pdl",
        device, d->name, d->compute_major, d->compute_minor));
  }
  RLT_ASSIGN_OR_RETURN(bool waits, cuda::kernels_wait_for_upstream());
  if (!waits) {
    return failed_precondition(fmt::format(
        "programmatic dependent launch (--pdl): device {} (sm_{}{}) runs rlt's kernels from code "
        "built for an older architecture (this build has {}), where they cannot wait for their "
        "producers: run without --pdl, or build for this GPU (CMAKE_CUDA_ARCHITECTURES)",
        device, d->compute_major, d->compute_minor, cuda::compiled_architectures()));
  }
  return {};
}

}  // namespace

// Where one pass's attention metadata lives: device pointers the kernels read, and the host copies
// run_attention validates. Tables and write blocks hold one set per planned depth.
struct PassBinding {
  int64_t rows = 0, num_seqs = 0;
  int32_t table_width = 0, max_seqlen_q = 1;
  const int32_t *positions = nullptr, *write_slot = nullptr, *write_block = nullptr;
  const int32_t *lengths = nullptr, *cu = nullptr, *tables = nullptr;
  const int32_t *host_lengths = nullptr, *host_cu = nullptr, *host_tables = nullptr;
};

// The paged attention of one pass on the GPU: plans on the host; per layer applies RoPE, writes
// K/V into the rows' page slots and runs the backend on the bound metadata.
class GpuModelRunner::Attention final : public GpuCoreAttention {
 public:
  Attention(GpuModelRunner& runner, std::unique_ptr<attention::AttentionBackend> backend,
            const attention::BackendCapabilities& caps)
      : runner_(runner), backend_(std::move(backend)), caps_(caps) {}

  void release_captures() { backend_->release_captures(); }

  // Takes the pass's host plan (which must outlive the upload and the binding): the rows'
  // positions and the tables of every planned depth, flattened for one upload.
  Status use(const PassInput& pass) {
    const kv::KVGeometry& g = runner_.storage_->geometry();
    RLT_RETURN_IF_ERROR(check_pass_writes(pass, g.num_blocks, g.block_size));
    pass_ = &pass;
    positions_.clear();
    for (const auto& r : pass.rows) positions_.push_back(r.position);
    tables_flat_.clear();
    for (const auto& t : pass.attention.block_tables)
      tables_flat_.insert(tables_flat_.end(), t.begin(), t.end());
    depth_index_ = 0;
    return {};
  }

  // Uploads the plan as it is and binds it (eager passes).
  Status upload_and_bind() {
    const attention::AttentionPlan& plan_ = pass_->attention;
    const PassWrites& writes_ = pass_->writes;
    std::vector<const int32_t*> dev;
    RLT_RETURN_IF_ERROR(runner_.upload({positions_, writes_.slot, writes_.block,
                                        plan_.context_lengths, plan_.cu_seqlens_q, tables_flat_},
                                       dev));
    PassBinding b;
    b.rows = plan_.rows;
    b.num_seqs = plan_.num_seqs;
    b.table_width = plan_.table_width;
    b.max_seqlen_q = plan_.max_seqlen_q;
    b.positions = dev[0];
    b.write_slot = dev[1];
    b.write_block = dev[2];
    b.lengths = dev[3];
    b.cu = plan_.packed ? dev[4] : nullptr;
    b.tables = dev[5];
    b.host_lengths = plan_.context_lengths.data();
    b.host_cu = plan_.packed ? plan_.cu_seqlens_q.data() : nullptr;
    b.host_tables = tables_flat_.data();
    bind(b);
    return check_bound(pass_->num_loops());
  }

  void bind(const PassBinding& b) { binding_ = b; }
  // Validates the bound metadata of each of the pass's `loops` table sets once (on the host
  // copies): every layer's attend() then runs unchecked.
  Status check_bound(size_t loops) {
    for (size_t d = 0; d < loops; ++d) {
      depth_index_ = d;
      // q and out stand in for the layer buffers; the check reads neither.
      const attention::AttentionParams p = params(0, nullptr, nullptr);
      RLT_RETURN_IF_ERROR(attention::check_attention_pass(*backend_, p));
    }
    depth_index_ = 0;
    return {};
  }
  void use_depth(size_t index) { depth_index_ = index; }
  const attention::AttentionPlan& host_plan() const { return pass_->attention; }
  const std::vector<int32_t>& positions() const { return positions_; }
  const PassWrites& writes() const { return pass_->writes; }

  // The call attend() makes for `layer`, with the host metadata in place (for validation).
  attention::AttentionParams params(int32_t layer, const float* q, float* out) const {
    const PassBinding& b = binding_;
    attention::AttentionParams p;
    p.q = q;
    p.out = out;
    p.rows = b.rows;
    p.num_q_heads = static_cast<int32_t>(runner_.model_->config.num_heads);
    p.k = runner_.storage_->layer_view(kv::KVPool::kKey, layer);
    p.v = runner_.storage_->layer_view(kv::KVPool::kValue, layer);
    const size_t table_set = depth_index_ * static_cast<size_t>(b.num_seqs * b.table_width);
    p.block_tables = b.tables + table_set;
    p.host_block_tables = b.host_tables + table_set;
    p.table_width = b.table_width;
    p.context_lengths = b.lengths;
    p.host_context_lengths = b.host_lengths;
    p.num_seqs = b.num_seqs;
    p.cu_seqlens_q = b.cu;
    p.host_cu_seqlens_q = b.host_cu;
    p.max_seqlen_q = b.max_seqlen_q;
    p.stream = runner_.stream_->handle();
    return p;
  }

  Status attend(int64_t layer, const float* qkv, int64_t rows, float* q, float* out) override {
    const io::ModelConfig& c = runner_.model_->config;
    const auto l = static_cast<int32_t>(layer);
    const attention::AttentionParams p = params(l, q, out);
    cuda::RopeKvWrite w;
    w.qkv = qkv;
    w.rows = rows;
    w.num_heads = static_cast<int32_t>(c.num_heads);
    w.num_kv_heads = static_cast<int32_t>(c.num_kv_heads);
    w.head_dim = static_cast<int32_t>(c.head_dim);
    w.positions = binding_.positions;
    w.inv_freq = runner_.core_->inv_freq();
    w.q_out = q;
    w.k_cache = p.k.base;
    w.v_cache = p.v.base;
    RLT_ASSIGN_OR_RETURN(w.cache_type, cuda::element_type_of(p.k.dtype, "the KV cache"));
    w.block_stride = p.k.block_stride;
    w.token_stride = p.k.token_stride;
    w.head_stride = p.k.head_stride;
    w.write_block = binding_.write_block + depth_index_ * static_cast<size_t>(rows);
    w.write_slot = binding_.write_slot;
    RLT_RETURN_IF_ERROR(cuda::rope_and_write_kv(w, runner_.stream_->handle()));
    return attention::run_checked_attention(*backend_, p);
  }

 private:
  GpuModelRunner& runner_;
  std::unique_ptr<attention::AttentionBackend> backend_;
  attention::BackendCapabilities caps_;
  const PassInput* pass_ = nullptr;
  std::vector<int32_t> positions_, tables_flat_;
  PassBinding binding_;
  size_t depth_index_ = 0;
};

GpuModelRunner::~GpuModelRunner() {
  if (stream_) (void)stream_->synchronize();
}

Result<std::unique_ptr<GpuModelRunner>> GpuModelRunner::create(
    std::shared_ptr<const model::OuroModel> model, const kv::KVGeometry& geometry, int device,
    std::unique_ptr<attention::AttentionBackend> backend,
    const attention::BackendCapabilities& caps, const GpuRunnerSettings& settings) {
  const CudaGraphMode graphs = settings.cuda_graphs;
  if (!backend->reads_device_memory()) {
    return invalid_argument(
        fmt::format("attention backend {} runs on the CPU; the GPU runner needs a CUDA backend",
                    backend->name()));
  }
  RLT_RETURN_IF_ERROR(cuda::set_device(device));
  std::unique_ptr<GpuModelRunner> r(new GpuModelRunner());
  r->device_ = device;
  r->model_ = std::move(model);
  // The attention backend keeps buffers alive for captured graphs until they are all dropped.
  r->graphs_ = std::make_unique<GpuGraphCache>(graphs, kMaxGraphRows, [raw = r.get()] {
    if (raw->attention_) raw->attention_->release_captures();
  });
  r->device_sampling_ = settings.device_sampling;
  RLT_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::create());
  r->stream_ = std::make_unique<cuda::Stream>(std::move(stream));
  r->sampler_.set_stream(r->stream_->handle());
  if (settings.programmatic_launch) {
    RLT_RETURN_IF_ERROR(check_programmatic_launch(device));
    cuda::set_programmatic_launch(r->stream_->handle(), true);
  }
  RLT_ASSIGN_OR_RETURN(r->core_, GpuCore::create(*r->model_, r->stream_->handle()));
  RLT_ASSIGN_OR_RETURN(r->storage_, cuda::CudaKVStorage::create(geometry, r->stream_->handle()));
  r->attention_ = std::make_unique<Attention>(*r, std::move(backend), caps);
  // The first slot holds no request: padding rows of graph buckets gather and scatter it.
  r->states_ = std::make_unique<GpuStateSlots>(r->model_->config.hidden_size, r->stream_->handle(),
                                               [raw = r.get()] { raw->invalidate_graphs(); });
  RLT_RETURN_IF_ERROR(r->states_->init());
  // The metadata buffer the graphs point at, sized generously so that it rarely moves.
  r->uploads_ = std::make_unique<GpuUploadRing>(r->stream_->handle(),
                                                [raw = r.get()] { raw->invalidate_graphs(); });
  RLT_RETURN_IF_ERROR(r->uploads_->init());
  for (ResultSlot& slot : r->results_) {
    RLT_ASSIGN_OR_RETURN(slot.start, cuda::Event::create(/*timing=*/true));
    RLT_ASSIGN_OR_RETURN(slot.done, cuda::Event::create(/*timing=*/true));
  }
  if (settings.reserve_rows > 0) RLT_RETURN_IF_ERROR(r->ensure_rows(settings.reserve_rows));
  if (settings.reserve_sampling_rows > 0) {
    RLT_RETURN_IF_ERROR(r->ensure_sampling(settings.reserve_sampling_rows));
    // One slot per request the scheduler may run at once, plus the padding slot.
    RLT_RETURN_IF_ERROR(r->states_->reserve(static_cast<int32_t>(settings.reserve_sampling_rows)));
  }
  return r;
}

Status GpuModelRunner::synchronize() {
  return stream_->synchronize();
}

Status GpuModelRunner::upload(std::initializer_list<std::span<const int32_t>> arrays,
                              std::vector<const int32_t*>& device) {
  // The batch's device span starts with its first upload (after the host planned it).
  RLT_RETURN_IF_ERROR(start_device_span());
  return uploads_->upload(arrays, device);
}

Status GpuModelRunner::ensure_rows(int64_t rows) {
  if (rows <= row_capacity_) return {};
  const io::ModelConfig& c = model_->config;
  const int64_t capacity = std::max<int64_t>(rows, 2 * row_capacity_);
  RLT_RETURN_IF_ERROR(synchronize());
  invalidate_graphs();
  h_ = cuda::DeviceAllocation();
  gates_ = cuda::DeviceAllocation();
  row_capacity_ = 0;  // until the new buffers exist: a failed allocation is retried next time
  RLT_ASSIGN_OR_RETURN(h_, cuda::DeviceAllocation::allocate(
                               static_cast<size_t>(capacity * c.hidden_size) * 4, "hidden rows"));
  RLT_ASSIGN_OR_RETURN(
      gates_, cuda::DeviceAllocation::allocate(static_cast<size_t>(capacity) * 4, "gate logits"));
  RLT_RETURN_IF_ERROR(core_->reserve(capacity));
  row_capacity_ = capacity;
  return {};
}

Result<int32_t> GpuModelRunner::slot(kv::RequestId id) {
  return states_->slot(id);
}

void GpuModelRunner::release(kv::RequestId id) {
  states_->release(id);
}

Status GpuModelRunner::submit(const ModelInput& input) {
  RLT_RETURN_IF_ERROR(check_can_submit(input.seq, tickets_.size()));
  // The current device is per thread, and the engine may step from another thread (the server's
  // worker) than the one that created it.
  RLT_RETURN_IF_ERROR(cuda::set_device(device_));
  Ticket ticket;
  ticket.seq = input.seq;
  ticket.stage = input.stage;
  // VERIFY returns the logits of every row of its pass (several per request).
  ticket.rows = input.stage == Stage::kVerify && !input.passes().empty()
                    ? input.passes()[0].num_rows()
                    : static_cast<int64_t>(input.requests.size());
  // Free: its last batch was collected (more slots than batches in flight).
  ticket.slot = next_result_;
  ResultSlot& slot = results_[ticket.slot];
  // The batch's device span starts at its first upload (after the host planned it).
  unstarted_ = &slot.start;
  RLT_RETURN_IF_ERROR(enqueue(input, slot.host, ticket));
  RLT_RETURN_IF_ERROR(start_device_span());
  RLT_RETURN_IF_ERROR(slot.done.record(stream_->handle()));
  next_result_ = (next_result_ + 1) % results_.size();
  tickets_.push_back(ticket);
  return {};
}

Status GpuModelRunner::collect(uint64_t seq, BatchResult* out) {
  RLT_RETURN_IF_ERROR(check_collect_order(
      seq, tickets_.empty() ? std::nullopt : std::optional<uint64_t>(tickets_.front().seq)));
  const Ticket t = tickets_.front();
  tickets_.pop_front();
  RLT_RETURN_IF_ERROR(cuda::set_device(device_));
  const ResultSlot& slot = results_[t.slot];
  RLT_RETURN_IF_ERROR(slot.done.synchronize());
  add_stage_time(t.stage, slot);
  *out = BatchResult();
  if (t.stage == Stage::kRecurrent) {
    const auto* gates = reinterpret_cast<const float*>(slot.host.data());
    out->gate_logits.assign(gates, gates + t.rows);
  } else if (t.stage == Stage::kCoda || t.stage == Stage::kVerify) {
    if (t.device_sampled) {
      GpuDeviceSampler::read(slot.host.data(), t.rows, t.device_logprobs, out);
    } else {
      // Read in place from pinned memory until the next collect().
      out->runner_logits = {reinterpret_cast<const float*>(slot.host.data()),
                            static_cast<size_t>(t.rows * model_->config.vocab_size)};
    }
  }
  return {};
}

// The stages' steps (runner/stage_driver.h) on the device; h_ holds the pass's rows, results go
// to the batch's pinned result slot.
class GpuModelRunner::Stages final : public StageExecutor {
 public:
  Stages(GpuModelRunner& runner, cuda::PinnedBuffer& results, Ticket& ticket)
      : r_(runner), results_(results), ticket_(ticket) {}

  Status embed_pass(const PassInput& pass) override { return r_.stage_rows(pass.tokens); }

  // One upload binds the pass's metadata for all its loops.
  Status bind_pass(const PassInput& pass) override {
    RLT_RETURN_IF_ERROR(r_.attention_->use(pass));
    return r_.attention_->upload_and_bind();
  }

  Status pass_loop(const PassInput& pass, size_t depth_index) override {
    r_.attention_->use_depth(depth_index);
    return r_.core_->run_loop(floats(r_.h_), pass.num_rows(), *r_.attention_, nullptr);
  }

  Status keep_states(const PassInput& pass) override { return r_.keep_prompt_states(pass); }
  // Not a capability of this runner (scores_prompts() is false): the engine refuses such
  // requests at admission, so this is reached only by a caller that skipped the check.
  Status score_rows(const PassInput&) override {
    return unimplemented("the GPU runner does not compute prompt logprobs");
  }

  // Embeds the tokens into h_, then scatters the rows into their requests' state slots.
  Status prelude(std::span<const kv::RequestId> requests,
                 std::span<const int32_t> tokens) override {
    const auto n = static_cast<int64_t>(requests.size());
    RLT_RETURN_IF_ERROR(r_.ensure_rows(n));
    r_.slots_.clear();
    for (kv::RequestId id : requests) {
      RLT_ASSIGN_OR_RETURN(int32_t s, r_.slot(id));
      r_.slots_.push_back(s);
    }
    std::vector<const int32_t*> dev;
    RLT_RETURN_IF_ERROR(r_.upload({tokens, r_.slots_}, dev));
    RLT_RETURN_IF_ERROR(r_.core_->embed(dev[0], n, floats(r_.h_)));
    return cuda::scatter_rows(floats(r_.h_), dev[1], n, r_.model_->config.hidden_size,
                              r_.states_->data(), r_.stream_->handle());
  }

  // The lm head on every row of h_, into pinned memory for the host sampler.
  Status pass_logits(const PassInput& pass) override {
    const int64_t n = pass.num_rows(), vocab = r_.model_->config.vocab_size;
    const size_t bytes = static_cast<size_t>(n * vocab) * 4;
    RLT_RETURN_IF_ERROR(r_.grow_buffer(r_.logits_, bytes, "logits"));
    RLT_RETURN_IF_ERROR(r_.core_->lm_head(floats(r_.h_), n, floats(r_.logits_)));
    RLT_RETURN_IF_ERROR(results_.reserve(bytes));
    return cuda_check(cudaMemcpyAsync(results_.data(), r_.logits_.data(), bytes,
                                      cudaMemcpyDeviceToHost, r_.stream_->handle()),
                      "reading logits");
  }

  Status recurrent(const PassInput& pass) override { return r_.enqueue_recurrent(pass, results_); }
  Status coda(const ModelInput& input) override {
    return r_.enqueue_coda(input, results_, ticket_);
  }

 private:
  GpuModelRunner& r_;
  cuda::PinnedBuffer& results_;
  Ticket& ticket_;
};

Status GpuModelRunner::enqueue(const ModelInput& input, cuda::PinnedBuffer& results,
                               Ticket& ticket) {
  Stages stages(*this, results, ticket);
  return run_stages(input, stages);
}

Status GpuModelRunner::enqueue_coda(const ModelInput& input, cuda::PinnedBuffer& results,
                                    Ticket& ticket) {
  const int64_t hidden = model_->config.hidden_size, vocab = model_->config.vocab_size;
  const auto n = static_cast<int64_t>(input.requests.size());
  cudaStream_t stream = stream_->handle();
  RLT_RETURN_IF_ERROR(ensure_rows(n));
  slots_.clear();
  for (kv::RequestId id : input.requests) {
    RLT_ASSIGN_OR_RETURN(int32_t s, slot(id));
    slots_.push_back(s);
  }
  // Rows are sampled here with the sampler's rules (penalties and logprobs included), unless the
  // engine asked for host sampling: then every row's logits go to the host sampler.
  sampling::DeviceSampleRows& rows = sample_rows_;
  rows.clear();
  if (device_sampling_) {
    if (input.sampling.size() != input.requests.size()) {
      return internal_error(
          fmt::format("device sampling of {} rows got {} sampling rows", n, input.sampling.size()));
    }
    // A request no longer live (null params) is sampled greedily; its token is never read.
    static const SamplingParams kGreedy;
    for (const SamplingRow& row : input.sampling)
      rows.add(row.params ? *row.params : kGreedy, row.history, row.uniform, vocab);
  }
  // Larger batches than one sampling call takes, and rows with a structured-output mask (the
  // device kernels have no mask step), fall back to the host sampler.
  const bool any_mask = std::any_of(input.sampling.begin(), input.sampling.end(),
                                    [](const SamplingRow& r) { return !r.allowed.empty(); });
  const bool on_device = device_sampling_ && rows.ids_in_vocab && !rows.any_logit_bias &&
                         !any_mask && n * vocab <= cuda::kMaxDeviceSampleElements;
  static_assert(sizeof(cuda::DeviceSampleParams) % sizeof(int32_t) == 0,
                "the parameters travel as int32 words");
  const std::span<const int32_t> param_words(
      reinterpret_cast<const int32_t*>(rows.params.data()),
      rows.params.size() * sizeof(cuda::DeviceSampleParams) / sizeof(int32_t));
  std::vector<const int32_t*> dev;
  RLT_RETURN_IF_ERROR(upload({slots_, param_words, rows.history_ids, rows.history_counts}, dev));
  RLT_RETURN_IF_ERROR(cuda::gather_rows(states_->data(), dev[0], n, hidden, floats(h_), stream));
  RLT_RETURN_IF_ERROR(grow_buffer(logits_, static_cast<size_t>(n * vocab) * 4, "logits"));
  RLT_RETURN_IF_ERROR(core_->lm_head(floats(h_), n, floats(logits_)));
  if (on_device) {
    ++device_sampled_batches_;
    ticket.device_sampled = true;
    ticket.device_logprobs = rows.any_logprobs;
    cuda::SampleBatch sample;
    sample.logits = floats(logits_);
    sample.rows = n;
    sample.vocab = vocab;
    sample.params = reinterpret_cast<const cuda::DeviceSampleParams*>(dev[1]);
    sample.any_top_p = rows.any_top_p;
    sample.any_penalties = rows.any_penalties;
    sample.any_logprobs = rows.any_logprobs;
    sample.history_ids = dev[2];
    sample.history_counts = dev[3];
    return sampler_.sample(sample, results);
  }
  // Into pinned memory (a fast DMA) that the sampler reads in place.
  const size_t bytes = static_cast<size_t>(n * vocab) * 4;
  RLT_RETURN_IF_ERROR(results.reserve(bytes));
  return cuda_check(
      cudaMemcpyAsync(results.data(), logits_.data(), bytes, cudaMemcpyDeviceToHost, stream),
      "reading logits");
}

Status GpuModelRunner::grow_buffer(cuda::DeviceAllocation& buffer, size_t bytes, const char* what) {
  if (buffer.bytes() >= bytes) return {};
  RLT_RETURN_IF_ERROR(synchronize());  // a queued batch may still use it
  buffer = cuda::DeviceAllocation();
  RLT_ASSIGN_OR_RETURN(buffer, cuda::DeviceAllocation::allocate(bytes, what));
  return {};
}

Status GpuModelRunner::ensure_sampling(int64_t rows) {
  const int64_t vocab = model_->config.vocab_size;
  RLT_RETURN_IF_ERROR(grow_buffer(logits_, static_cast<size_t>(rows * vocab) * 4, "logits"));
  if (!device_sampling_ || rows * vocab > cuda::kMaxDeviceSampleElements) return {};
  return sampler_.reserve(rows, vocab);
}

Status GpuModelRunner::start_device_span() {
  if (unstarted_ == nullptr) return {};
  const cuda::Event* start = unstarted_;
  unstarted_ = nullptr;
  return start->record(stream_->handle());
}

void GpuModelRunner::add_stage_time(Stage stage, const ResultSlot& slot) {
  DeviceStageTime* time = nullptr;
  switch (stage) {
    case Stage::kPrefill:
      time = &stage_times_.prefill;
      break;
    case Stage::kPrelude:
      time = &stage_times_.prelude;
      break;
    case Stage::kRecurrent:
      time = &stage_times_.recurrent;
      break;
    case Stage::kCoda:
      time = &stage_times_.coda;
      break;
    case Stage::kVerify:
      time = &stage_times_.verify;
      break;
  }
  // Timing is best effort: a batch that ran is never failed for it.
  auto ms = cuda::Event::elapsed_ms(slot.start, slot.done);
  if (!ms.ok()) {
    log_warn(
        fmt::format("device time of a {} batch: {}", stage_name(stage), ms.status().to_string()));
    return;
  }
  time->milliseconds += *ms;
  ++time->batches;
}

void GpuModelRunner::invalidate_graphs() {
  if (graphs_) graphs_->clear();
}

Status GpuModelRunner::recurrent_pass(int64_t rows, const int32_t* slots) {
  const int64_t hidden = model_->config.hidden_size;
  cudaStream_t stream = stream_->handle();
  RLT_RETURN_IF_ERROR(cuda::gather_rows(states_->data(), slots, rows, hidden, floats(h_), stream));
  RLT_RETURN_IF_ERROR(core_->run_loop(floats(h_), rows, *attention_, floats(gates_)));
  return cuda::scatter_rows(floats(h_), slots, rows, hidden, states_->data(), stream);
}

Status GpuModelRunner::enqueue_recurrent(const PassInput& pass, cuda::PinnedBuffer& results) {
  const int64_t n = pass.num_rows();
  // kOn captures every size; otherwise very large batches (already launch-efficient) run eagerly.
  const bool graphs = graphs_->enabled_for(n);
  const int64_t rows = graphs ? next_power_of_two(n) : n;
  RLT_RETURN_IF_ERROR(ensure_rows(rows));
  slots_.clear();
  for (const auto& row : pass.rows) {
    RLT_ASSIGN_OR_RETURN(int32_t s, slot(row.request));
    slots_.push_back(s);
  }
  RLT_RETURN_IF_ERROR(attention_->use(pass));
  const attention::AttentionPlan& plan = attention_->host_plan();
  // Padded to the bucket: rows past n read and write the padding block and slot.
  const int32_t width =
      graphs ? static_cast<int32_t>(next_power_of_two(plan.table_width)) : plan.table_width;
  const kv::BlockId pad_block = storage_->padding_block();
  const int32_t pad_slot = states_->padding_slot();
  auto padded = [&](std::span<const int32_t> values, int32_t fill) {
    std::vector<int32_t> v(values.begin(), values.end());
    v.resize(static_cast<size_t>(rows), fill);
    return v;
  };
  const std::vector<int32_t> slots = padded(slots_, pad_slot),
                             positions = padded(attention_->positions(), 0);
  const std::vector<int32_t> write_slot = padded(attention_->writes().slot, 0);
  const std::vector<int32_t> write_block = padded(attention_->writes().block, pad_block);
  const std::vector<int32_t> lengths = padded(plan.context_lengths, 1);
  std::vector<int32_t> tables(static_cast<size_t>(rows * width), pad_block);
  for (int64_t r = 0; r < n; ++r) {
    std::copy(plan.block_tables[0].begin() + r * plan.table_width,
              plan.block_tables[0].begin() + (r + 1) * plan.table_width,
              tables.begin() + r * width);
  }
  std::vector<const int32_t*> dev;
  RLT_RETURN_IF_ERROR(upload({slots, positions, write_slot, write_block, lengths, tables}, dev));
  PassBinding b;
  b.rows = b.num_seqs = rows;
  b.table_width = width;
  b.positions = dev[1];
  b.write_slot = dev[2];
  b.write_block = dev[3];
  b.lengths = dev[4];
  b.tables = dev[5];
  b.host_lengths = lengths.data();
  b.host_tables = tables.data();
  attention_->bind(b);
  // Checked once for the eager pass and the replay alike (a graph replay skips every check).
  RLT_RETURN_IF_ERROR(attention_->check_bound(1));

  RLT_RETURN_IF_ERROR(graphs_->find_or_capture({rows, width}, graphs, stream_->handle(),
                                               [&] { return recurrent_pass(rows, dev[0]); }));
  attention_->bind({});  // the binding points at this function's host vectors
  RLT_RETURN_IF_ERROR(results.reserve(static_cast<size_t>(n) * 4));
  return cuda_check(cudaMemcpyAsync(results.data(), gates_.data(), static_cast<size_t>(n) * 4,
                                    cudaMemcpyDeviceToHost, stream_->handle()),
                    "reading gate logits");
}

Status GpuModelRunner::stage_rows(std::span<const int32_t> tokens) {
  std::vector<const int32_t*> dev;
  const auto rows = static_cast<int64_t>(tokens.size());
  RLT_RETURN_IF_ERROR(ensure_rows(rows));
  RLT_RETURN_IF_ERROR(upload({tokens}, dev));
  return core_->embed(dev[0], rows, floats(h_));
}

Status GpuModelRunner::keep_prompt_states(const PassInput& pass) {
  const int64_t hidden = model_->config.hidden_size;
  for (const int32_t i : pass.keep_state) {
    RLT_ASSIGN_OR_RETURN(int32_t s, slot(pass.rows[static_cast<size_t>(i)].request));
    RLT_RETURN_IF_ERROR(cuda_check(
        cudaMemcpyAsync(states_->data() + s * hidden, floats(h_) + static_cast<int64_t>(i) * hidden,
                        static_cast<size_t>(hidden) * 4, cudaMemcpyDeviceToDevice,
                        stream_->handle()),
        "saving the prompt state"));
  }
  return {};
}

}  // namespace rlt::runner
