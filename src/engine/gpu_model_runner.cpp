#include "engine/gpu_model_runner.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda/device.h"

namespace rlt::engine {
namespace {

Status check(cudaError_t e, const char* what) {
  return cuda::cuda_status(static_cast<int>(e), what);
}

float* floats(cuda::DeviceAllocation& a) {
  return static_cast<float*>(a.data());
}

Result<cuda::ElementType> cache_type(DType d) {
  switch (d) {
    case DType::kF32:
      return cuda::ElementType::kF32;
    case DType::kBF16:
      return cuda::ElementType::kBF16;
    case DType::kF16:
      return cuda::ElementType::kF16;
    default:
      return invalid_argument(fmt::format("KV dtype {} is not f32, bf16 or f16", dtype_name(d)));
  }
}

}  // namespace

// The paged attention of one pass on the GPU: plans on the host, uploads the plan (tables per
// planned depth, lengths, grouping, positions, write slots) and, per layer, applies RoPE, writes
// K/V into the rows' page slots and runs the backend with the host plan for validation.
class GpuModelRunner::Attention final : public GpuCoreAttention {
 public:
  Attention(GpuModelRunner& runner, std::unique_ptr<attention::AttentionBackend> backend,
            const attention::BackendCapabilities& caps)
      : runner_(runner), backend_(std::move(backend)), caps_(caps) {}

  Status plan(std::span<const attention::PlannedRow> rows, std::span<const int32_t> depths,
              const kv::KVCacheManager& kv, bool packed) {
    Status lookup_error;
    const attention::TableSource tables = [&](uint64_t request,
                                              int32_t depth) -> std::span<const int32_t> {
      auto t = kv.block_table(request, depth);
      if (!t.ok()) {
        if (lookup_error.ok()) lookup_error = t.status();
        return {};
      }
      return *t;
    };
    const attention::PlannerOptions options{kv.block_size(), packed && caps_.packed_prefill, 0};
    Status s = depths.empty()
                   ? attention::plan_attention(rows, tables, options, plan_)
                   : attention::plan_attention_depths(rows, depths, tables, options, plan_);
    if (!lookup_error.ok()) return lookup_error;
    RLT_RETURN_IF_ERROR(s);
    const int32_t bs = kv.block_size();
    const size_t passes = depths.empty() ? 1 : depths.size();
    positions_.resize(rows.size());
    write_slot_.resize(rows.size());
    write_block_.resize(passes * rows.size());
    for (size_t d = 0; d < passes; ++d) {
      for (size_t i = 0; i < rows.size(); ++i) {
        const int32_t depth = depths.empty() ? rows[i].depth : depths[d];
        RLT_ASSIGN_OR_RETURN(auto table, kv.block_table(rows[i].request, depth));
        const int32_t page = rows[i].position / bs;
        if (page >= static_cast<int32_t>(table.size())) {
          return failed_precondition(
              fmt::format("request {} has no page for position {} at depth {}", rows[i].request,
                          rows[i].position, depth));
        }
        write_block_[d * rows.size() + i] = table[page];
        positions_[i] = rows[i].position;
        write_slot_[i] = rows[i].position % bs;
      }
    }
    tables_flat_.clear();
    for (const auto& t : plan_.block_tables)
      tables_flat_.insert(tables_flat_.end(), t.begin(), t.end());
    std::vector<const int32_t*> dev;
    RLT_RETURN_IF_ERROR(runner_.upload({positions_, write_slot_, write_block_,
                                        plan_.context_lengths, plan_.cu_seqlens_q, tables_flat_},
                                       dev));
    positions_dev_ = dev[0];
    write_slot_dev_ = dev[1];
    write_block_dev_ = dev[2];
    lengths_dev_ = dev[3];
    cu_dev_ = plan_.packed ? dev[4] : nullptr;
    tables_dev_ = dev[5];
    depth_index_ = 0;
    return {};
  }

  void use_depth(size_t index) { depth_index_ = index; }

  Status attend(int64_t layer, const float* qkv, int64_t rows, float* q, float* out) override {
    const io::ModelConfig& c = runner_.model_->config;
    const auto l = static_cast<int32_t>(layer);
    const kv::PagedKVLayerView k = runner_.storage_->layer_view(kv::KVPool::kKey, l);
    const kv::PagedKVLayerView v = runner_.storage_->layer_view(kv::KVPool::kValue, l);
    cuda::RopeKvWrite w;
    w.qkv = qkv;
    w.rows = rows;
    w.num_heads = static_cast<int32_t>(c.num_heads);
    w.num_kv_heads = static_cast<int32_t>(c.num_kv_heads);
    w.head_dim = static_cast<int32_t>(c.head_dim);
    w.positions = positions_dev_;
    w.inv_freq = runner_.core_->inv_freq();
    w.q_out = q;
    w.k_cache = k.base;
    w.v_cache = v.base;
    RLT_ASSIGN_OR_RETURN(w.cache_type, cache_type(k.dtype));
    w.block_stride = k.block_stride;
    w.token_stride = k.token_stride;
    w.head_stride = k.head_stride;
    w.write_block = write_block_dev_ + depth_index_ * static_cast<size_t>(rows);
    w.write_slot = write_slot_dev_;
    RLT_RETURN_IF_ERROR(cuda::rope_and_write_kv(w, runner_.stream_->handle()));

    attention::AttentionParams p;
    p.q = q;
    p.out = out;
    p.num_q_heads = w.num_heads;
    p.k = k;
    p.v = v;
    plan_.bind(p, depth_index_);  // host metadata: validation
    p.host_block_tables = p.block_tables;
    p.host_context_lengths = p.context_lengths;
    p.host_cu_seqlens_q = p.cu_seqlens_q;
    p.block_tables =
        tables_dev_ + depth_index_ * static_cast<size_t>(plan_.num_seqs * plan_.table_width);
    p.context_lengths = lengths_dev_;
    p.cu_seqlens_q = cu_dev_;
    p.stream = runner_.stream_->handle();
    return attention::run_attention(*backend_, p);
  }

 private:
  GpuModelRunner& runner_;
  std::unique_ptr<attention::AttentionBackend> backend_;
  attention::BackendCapabilities caps_;
  attention::AttentionPlan plan_;
  std::vector<int32_t> positions_, write_slot_, write_block_, tables_flat_;
  const int32_t *positions_dev_ = nullptr, *write_slot_dev_ = nullptr, *write_block_dev_ = nullptr;
  const int32_t *lengths_dev_ = nullptr, *cu_dev_ = nullptr, *tables_dev_ = nullptr;
  size_t depth_index_ = 0;
};

GpuModelRunner::~GpuModelRunner() {
  if (stream_) (void)stream_->synchronize();
}

Result<std::unique_ptr<GpuModelRunner>> GpuModelRunner::create(
    std::shared_ptr<const model::OuroModel> model, const kv::KVGeometry& geometry, int device,
    std::unique_ptr<attention::AttentionBackend> backend,
    const attention::BackendCapabilities& caps, kv::KVLayout layout) {
  if (!backend->reads_device_memory()) {
    return invalid_argument(
        fmt::format("attention backend {} runs on the CPU; the GPU runner needs a CUDA backend",
                    backend->name()));
  }
  RLT_RETURN_IF_ERROR(cuda::set_device(device));
  std::unique_ptr<GpuModelRunner> r(new GpuModelRunner());
  r->model_ = std::move(model);
  r->layout_ = layout;
  RLT_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::create());
  r->stream_ = std::make_unique<cuda::Stream>(std::move(stream));
  RLT_ASSIGN_OR_RETURN(r->core_, GpuCore::create(*r->model_, r->stream_->handle()));
  RLT_ASSIGN_OR_RETURN(r->storage_, cuda::CudaKVStorage::create(geometry, r->stream_->handle()));
  r->attention_ = std::make_unique<Attention>(*r, std::move(backend), caps);
  return r;
}

Status GpuModelRunner::synchronize() {
  return stream_->synchronize();
}

Status GpuModelRunner::upload(std::initializer_list<std::span<const int32_t>> arrays,
                              std::vector<const int32_t*>& device) {
  size_t total = 0;
  for (const auto& a : arrays) total += (a.size() + 63) / 64 * 64;  // 256-byte aligned pieces
  const size_t bytes = std::max<size_t>(total, 64) * sizeof(int32_t);
  // The staging buffer is rewritten below: the previous upload must have landed.
  RLT_RETURN_IF_ERROR(synchronize());
  RLT_RETURN_IF_ERROR(staging_.reserve(bytes));
  if (metadata_.bytes() < bytes) {
    metadata_ = cuda::DeviceAllocation();
    RLT_ASSIGN_OR_RETURN(metadata_,
                         cuda::DeviceAllocation::allocate(bytes * 2, "attention metadata"));
  }
  auto* host = reinterpret_cast<int32_t*>(staging_.data());
  const auto* dev = static_cast<const int32_t*>(metadata_.data());
  device.clear();
  size_t offset = 0;
  for (const auto& a : arrays) {
    std::copy(a.begin(), a.end(), host + offset);
    device.push_back(dev + offset);
    offset += (a.size() + 63) / 64 * 64;
  }
  return check(cudaMemcpyAsync(metadata_.data(), staging_.data(), offset * sizeof(int32_t),
                               cudaMemcpyHostToDevice, stream_->handle()),
               "uploading the batch plan");
}

Status GpuModelRunner::ensure_rows(int64_t rows) {
  if (rows <= row_capacity_) return {};
  const io::ModelConfig& c = model_->config;
  const int64_t capacity = std::max<int64_t>(rows, 2 * row_capacity_);
  RLT_RETURN_IF_ERROR(synchronize());
  h_ = cuda::DeviceAllocation();
  out_ = cuda::DeviceAllocation();
  RLT_ASSIGN_OR_RETURN(h_, cuda::DeviceAllocation::allocate(
                               static_cast<size_t>(capacity * c.hidden_size) * 4, "hidden rows"));
  RLT_ASSIGN_OR_RETURN(out_, cuda::DeviceAllocation::allocate(
                                 static_cast<size_t>(capacity * c.vocab_size) * 4, "logits"));
  RLT_RETURN_IF_ERROR(core_->reserve(capacity));
  row_capacity_ = capacity;
  return {};
}

Result<int32_t> GpuModelRunner::slot(kv::RequestId id) {
  if (auto it = slot_of_.find(id); it != slot_of_.end()) return it->second;
  if (free_slots_.empty()) {
    const int64_t hidden = model_->config.hidden_size;
    const int32_t grown = std::max(16, 2 * state_capacity_);
    RLT_ASSIGN_OR_RETURN(cuda::DeviceAllocation bigger,
                         cuda::DeviceAllocation::allocate(static_cast<size_t>(grown * hidden) * 4,
                                                          "request states"));
    if (state_capacity_ > 0) {
      RLT_RETURN_IF_ERROR(check(cudaMemcpyAsync(bigger.data(), states_.data(), states_.bytes(),
                                                cudaMemcpyDeviceToDevice, stream_->handle()),
                                "growing request states"));
      RLT_RETURN_IF_ERROR(synchronize());
    }
    states_ = std::move(bigger);
    for (int32_t s = grown - 1; s >= state_capacity_; --s) free_slots_.push_back(s);
    state_capacity_ = grown;
  }
  const int32_t s = free_slots_.back();
  free_slots_.pop_back();
  slot_of_[id] = s;
  return s;
}

void GpuModelRunner::release(kv::RequestId id) {
  if (auto it = slot_of_.find(id); it != slot_of_.end()) {
    free_slots_.push_back(it->second);
    slot_of_.erase(it);
  }
}

Status GpuModelRunner::run_loops(std::span<const attention::PlannedRow> rows,
                                 std::span<const int32_t> depths, const kv::KVCacheManager& kv,
                                 bool packed) {
  RLT_RETURN_IF_ERROR(attention_->plan(rows, depths, kv, packed));
  const auto n = static_cast<int64_t>(rows.size());
  for (size_t d = 0; d < std::max<size_t>(depths.size(), 1); ++d) {
    attention_->use_depth(d);
    RLT_RETURN_IF_ERROR(core_->run_loop(floats(h_), n, *attention_, nullptr));
  }
  return {};
}

Status GpuModelRunner::execute(const sched::SchedulerOutput& batch,
                               const sched::Scheduler& scheduler, const kv::KVCacheManager& kv,
                               BatchResult* out) {
  const int64_t hidden = model_->config.hidden_size;
  const auto n = static_cast<int64_t>(batch.items.size());
  for (const auto& item : batch.items) {
    if (scheduler.find(item.id) == nullptr)
      return internal_error(fmt::format("batch names unknown request {}", item.id));
  }
  cudaStream_t stream = stream_->handle();
  std::vector<const int32_t*> dev;
  switch (batch.stage) {
    case sched::Stage::kPrefill:
      RLT_RETURN_IF_ERROR(layout_ == kv::KVLayout::kShared ? prefill_waves(batch, scheduler, kv)
                                                           : prefill(batch, scheduler, kv));
      return synchronize();
    case sched::Stage::kPrelude: {
      RLT_RETURN_IF_ERROR(ensure_rows(n));
      tokens_.clear();
      slots_.clear();
      for (const auto& item : batch.items) {
        tokens_.push_back(scheduler.find(item.id)->output_tokens.back());
        RLT_ASSIGN_OR_RETURN(int32_t s, slot(item.id));
        slots_.push_back(s);
      }
      RLT_RETURN_IF_ERROR(upload({tokens_, slots_}, dev));
      RLT_RETURN_IF_ERROR(core_->embed(dev[0], n, floats(h_)));
      RLT_RETURN_IF_ERROR(
          cuda::scatter_rows(floats(h_), dev[1], n, hidden, floats(states_), stream));
      return synchronize();
    }
    case sched::Stage::kRecurrent: {
      RLT_RETURN_IF_ERROR(ensure_rows(n));
      slots_.clear();
      rows_.clear();
      for (const auto& item : batch.items) {
        RLT_ASSIGN_OR_RETURN(int32_t s, slot(item.id));
        slots_.push_back(s);
        rows_.push_back({item.id, item.depth, item.position});
      }
      RLT_RETURN_IF_ERROR(upload({slots_}, dev));
      RLT_RETURN_IF_ERROR(
          cuda::gather_rows(floats(states_), dev[0], n, hidden, floats(h_), stream));
      // The plan's upload reuses the metadata buffer once the gather has read it (upload waits),
      // so the slots are uploaded again for the scatter.
      RLT_RETURN_IF_ERROR(attention_->plan(rows_, {}, kv, /*packed=*/false));
      RLT_RETURN_IF_ERROR(core_->run_loop(floats(h_), n, *attention_, floats(out_)));
      RLT_RETURN_IF_ERROR(upload({slots_}, dev));
      RLT_RETURN_IF_ERROR(
          cuda::scatter_rows(floats(h_), dev[0], n, hidden, floats(states_), stream));
      out->gate_logits.resize(static_cast<size_t>(n));
      RLT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(out->gate_logits.data(), out_.data(), static_cast<size_t>(n) * 4,
                                cudaMemcpyDeviceToHost, stream),
                "reading gate logits"));
      return synchronize();
    }
    case sched::Stage::kCoda: {
      RLT_RETURN_IF_ERROR(ensure_rows(n));
      slots_.clear();
      for (const auto& item : batch.items) {
        RLT_ASSIGN_OR_RETURN(int32_t s, slot(item.id));
        slots_.push_back(s);
      }
      RLT_RETURN_IF_ERROR(upload({slots_}, dev));
      RLT_RETURN_IF_ERROR(
          cuda::gather_rows(floats(states_), dev[0], n, hidden, floats(h_), stream));
      RLT_RETURN_IF_ERROR(core_->lm_head(floats(h_), n, floats(out_)));
      const int64_t vocab = model_->config.vocab_size;
      out->logits.resize(static_cast<size_t>(n * vocab));
      RLT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(out->logits.data(), out_.data(), static_cast<size_t>(n * vocab) * 4,
                                cudaMemcpyDeviceToHost, stream),
                "reading logits"));
      return synchronize();
    }
    default:
      return internal_error(
          fmt::format("cannot execute a {} batch", sched::stage_name(batch.stage)));
  }
}

Status GpuModelRunner::prefill(const sched::SchedulerOutput& batch,
                               const sched::Scheduler& scheduler, const kv::KVCacheManager& kv) {
  const int64_t hidden = model_->config.hidden_size;
  const int64_t rows = batch.rows();
  RLT_RETURN_IF_ERROR(ensure_rows(rows));
  tokens_.clear();
  rows_.clear();
  for (const auto& item : batch.items) {
    const sched::Request& r = *scheduler.find(item.id);
    for (int32_t p = item.token_start; p < item.token_start + item.token_count; ++p) {
      tokens_.push_back(r.prompt[static_cast<size_t>(p)]);
      rows_.push_back({item.id, 0, p});
    }
  }
  std::vector<const int32_t*> dev;
  RLT_RETURN_IF_ERROR(upload({tokens_}, dev));
  RLT_RETURN_IF_ERROR(core_->embed(dev[0], rows, floats(h_)));
  // Loop-major: loop t of every chunk row needs only loop-t K/V, so chunks are exact.
  depths_.resize(static_cast<size_t>(model_->config.total_ut_steps));
  std::iota(depths_.begin(), depths_.end(), 0);
  RLT_RETURN_IF_ERROR(run_loops(rows_, depths_, kv, /*packed=*/true));
  int64_t row = 0;
  for (const auto& item : batch.items) {
    row += item.token_count;
    const sched::Request& r = *scheduler.find(item.id);
    if (item.token_start + item.token_count == r.prompt_len()) {
      RLT_ASSIGN_OR_RETURN(int32_t s, slot(item.id));
      RLT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(floats(states_) + s * hidden, floats(h_) + (row - 1) * hidden,
                                static_cast<size_t>(hidden) * 4, cudaMemcpyDeviceToDevice,
                                stream_->handle()),
                "saving the prompt state"));
    }
  }
  return {};
}

Status GpuModelRunner::prefill_waves(const sched::SchedulerOutput& batch,
                                     const sched::Scheduler& scheduler,
                                     const kv::KVCacheManager& kv) {
  // `shared` keeps one plane that every loop overwrites, so a position finishes all its loops
  // before the next position attends to it: one wave per position offset.
  const int64_t hidden = model_->config.hidden_size;
  int32_t longest = 0;
  for (const auto& item : batch.items) longest = std::max(longest, item.token_count);
  RLT_RETURN_IF_ERROR(ensure_rows(static_cast<int64_t>(batch.items.size())));
  std::vector<const int32_t*> dev;
  for (int32_t offset = 0; offset < longest; ++offset) {
    tokens_.clear();
    rows_.clear();
    std::vector<kv::RequestId> ids;
    for (const auto& item : batch.items) {
      if (offset >= item.token_count) continue;
      const int32_t p = item.token_start + offset;
      tokens_.push_back(scheduler.find(item.id)->prompt[static_cast<size_t>(p)]);
      rows_.push_back({item.id, 0, p});
      ids.push_back(item.id);
    }
    const auto rows = static_cast<int64_t>(rows_.size());
    RLT_RETURN_IF_ERROR(upload({tokens_}, dev));
    RLT_RETURN_IF_ERROR(core_->embed(dev[0], rows, floats(h_)));
    for (int32_t d = 0; d < model_->config.total_ut_steps; ++d) {
      for (auto& r : rows_) r.depth = d;
      RLT_RETURN_IF_ERROR(run_loops(rows_, {}, kv, /*packed=*/false));
    }
    for (int64_t i = 0; i < rows; ++i) {
      const sched::Request& r = *scheduler.find(ids[static_cast<size_t>(i)]);
      if (rows_[static_cast<size_t>(i)].position == r.prompt_len() - 1) {
        RLT_ASSIGN_OR_RETURN(int32_t s, slot(r.id));
        RLT_RETURN_IF_ERROR(
            check(cudaMemcpyAsync(floats(states_) + s * hidden, floats(h_) + i * hidden,
                                  static_cast<size_t>(hidden) * 4, cudaMemcpyDeviceToDevice,
                                  stream_->handle()),
                  "saving the prompt state"));
      }
    }
  }
  return {};
}

}  // namespace rlt::engine
