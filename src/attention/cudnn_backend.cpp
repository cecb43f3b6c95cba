// cudnn: cuDNN's fused flash attention (the cuDNN frontend's SDPA node) over rlt's paged K/V.
// cuDNN reads the pools in place through a page table; Q and O pass through padded 16-bit staging
// (cudnn_staging.cu), since the contract's rows are packed f32. One cuDNN plan per bucketed shape
// (cudnn_shape.h), built on the first call of that shape and kept with its own staging, so a CUDA
// graph captured at a bucket keeps pointing at live buffers. libcudnn.so.9 is loaded on the first
// call (cudnn_library.h).
#include <cuda_runtime.h>
#include <cudnn_frontend.h>
#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <memory>
#include <unordered_map>

#include "attention/backend.h"
#include "attention/cudnn_library.h"
#include "attention/cudnn_shape.h"
#include "attention/cudnn_staging.h"
#include "cuda/device.h"
#include "cuda/element_type.h"
#include "cuda/runtime.h"

namespace rlt::attention {
namespace {

namespace fe = cudnn_frontend;

enum TensorUid : int64_t { kQ = 1, kK, kV, kO, kSeqLenQ, kSeqLenKv, kPageTable };

// One bucket's cuDNN graph with everything it reads and writes besides the K/V pools.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  cuda::DeviceAllocation q, o, seq_len_q, seq_len_kv, page_table, workspace;
  bool captured = false;  // a CUDA graph refers to these buffers: never evicted
  uint64_t last_use = 0;

  size_t bytes() const {
    return q.bytes() + o.bytes() + seq_len_q.bytes() + seq_len_kv.bytes() + page_table.bytes() +
           workspace.bytes();
  }
};

// Plans nobody captured are evicted, oldest first, once the plans together hold more than this.
constexpr size_t kPlanMemoryBudget = size_t{2} << 30;

Status cudnn_error(const std::string& what, fe::error_t e) {
  return failed_precondition(fmt::format("cudnn: {}: {}", what, e.get_message()));
}

std::shared_ptr<fe::graph::Tensor_attributes> int_tensor(fe::graph::Graph& g, const char* name,
                                                         int64_t uid, int64_t batch,
                                                         int64_t width) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_data_type(fe::DataType_t::INT32)
                      .set_dim({batch, 1, width, 1})
                      .set_stride({width, width, 1, 1}));
}

// The SDPA graph of one bucket: Q and O as [batch, heads, max_q, head_dim] over row-major
// [batch, max_q, heads, head_dim] staging; K and V as the paged pools [blocks, kv_heads,
// block_size, head_dim] with their own strides; padding mask from the per-sequence lengths;
// bottom-right causal alignment per sequence, which is the contract's (query j of n at position
// L - n + j sees keys 0 .. L - n + j).
// `sm_version` > 0 describes it for that architecture instead of the current device's (the nodes
// take the graph's context when they are added, so it is set first). `implementation` AUTO lets
// the frontend choose between cuDNN's unified and composite SDPA engines by cuDNN version.
// `device`, when given, describes the GPU for deviceless planning (count_cudnn_plans).
std::shared_ptr<fe::graph::Graph> describe_graph(
    const CudnnShape& s, int32_t sm_version = 0,
    fe::AttentionImplementation_t implementation = fe::AttentionImplementation_t::AUTO,
    std::shared_ptr<const fe::DeviceProperties> device = nullptr) {
  auto g = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) g->set_sm_version(sm_version);
  if (device) g->set_device_properties(std::move(device));
  const auto io = s.dtype == DType::kF16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t b = s.batch, h = s.q_heads, sq = s.max_q, d = s.head_dim;
  const std::vector<int64_t> qo_dim = {b, h, sq, d}, qo_stride = {sq * h * d, d, h * d, 1};
  auto q =
      g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim(qo_dim).set_stride(
          qo_stride));
  auto k = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("K_pool")
                         .set_uid(kK)
                         .set_dim({s.num_blocks, s.kv_heads, s.block_size, d})
                         .set_stride({s.k_block_stride, s.k_head_stride, s.k_token_stride, 1}));
  auto v = g->tensor(fe::graph::Tensor_attributes()
                         .set_name("V_pool")
                         .set_uid(kV)
                         .set_dim({s.num_blocks, s.kv_heads, s.block_size, d})
                         .set_stride({s.v_block_stride, s.v_head_stride, s.v_token_stride, 1}));
  auto seq_q = int_tensor(*g, "seq_len_q", kSeqLenQ, b, 1);
  auto seq_kv = int_tensor(*g, "seq_len_kv", kSeqLenKv, b, 1);
  // K and V share one table: the pools are indexed by the same block ids.
  auto table = int_tensor(*g, "page_table", kPageTable, b, s.table_width);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("rlt_paged_attention")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(d)))
                     .set_padding_mask(true)
                     .set_seq_len_q(seq_q)
                     .set_seq_len_kv(seq_kv)
                     .set_paged_attention_k_table(table)
                     .set_paged_attention_v_table(table)
                     .set_paged_attention_max_seq_len_kv(static_cast<int>(s.max_kv()));
  options.set_implementation(implementation);
  if (s.causal()) {
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
  }
  auto [o, stats] = g->sdpa(q, k, v, options);
  (void)stats;
  o->set_output(true).set_uid(kO).set_dim(qo_dim).set_stride(qo_stride);
  return g;
}

// The plan of one bucket. The frontend picks cuDNN's unified SDPA engine by cuDNN version alone;
// where it has no plan for this device or shape, the composite engine is tried before giving up.
Result<std::shared_ptr<fe::graph::Graph>> build_graph(const CudnnShape& s, cudnnHandle_t handle) {
  const std::vector<fe::HeurMode_t> modes = {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK};
  auto g = describe_graph(s);
  fe::error_t first = g->build(handle, modes);
  if (first.is_good()) return g;
  g = describe_graph(s, 0, fe::AttentionImplementation_t::COMPOSITE);
  fe::error_t second = g->build(handle, modes);
  if (second.is_good()) return g;
  return failed_precondition(fmt::format("cudnn: no cuDNN plan runs {}: {} (composite engine: {})",
                                         s.describe(), first.get_message(), second.get_message()));
}

class CudnnBackend final : public AttentionBackend {
 public:
  explicit CudnnBackend(int64_t staging_limit) : staging_limit_(staging_limit) {}

  ~CudnnBackend() override {
    plans_.clear();
    if (finished_ != nullptr) cudaEventDestroy(finished_);
    if (handle_ != nullptr) (void)cudnnDestroy(handle_);
  }

  std::string_view name() const override { return "cudnn"; }
  bool reads_device_memory() const override { return true; }

  void release_captures() override {
    for (auto& entry : plans_) entry.second->captured = false;
  }

  Status run(const AttentionParams& p) override {
    if (p.rows == 0) return {};
    try {
      // A captured call must replay for any metadata of its shape: it runs as given, its bucket
      // from its shape (max_seqlen_q) alone.
      RLT_ASSIGN_OR_RETURN(
          const bool capturing,
          cuda::stream_is_capturing(static_cast<cuda::StreamHandle>(p.stream), "cudnn"));
      if (capturing) return run_call(p, /*capturing=*/true);
      // Eager: a packed call whose padding would not fit runs as several cuDNN calls over runs
      // of sequences, decided from the host metadata.
      RLT_ASSIGN_OR_RETURN(std::vector<SequenceRange> ranges,
                           cudnn_sequence_ranges(p, p.host_cu_seqlens_q, staging_limit_));
      // A packed call runs at its real longest query run (max_seqlen_q may only bound it).
      if (ranges.size() == 1)
        return run_call(p.cu_seqlens_q ? sequence_range_params(p, ranges[0]) : p, false);
      for (const SequenceRange& r : ranges)
        RLT_RETURN_IF_ERROR(run_call(sequence_range_params(p, r), false));
      return {};
    } catch (const std::exception& e) {
      // The frontend reports most failures as error_t but throws for a few (a missing symbol).
      return internal_error(fmt::format("cudnn: {}", e.what()));
    }
  }

 private:
  // Loads cuDNN and creates the handle and the completion event, once (outside any capture:
  // both allocate).
  Status start() {
    if (handle_ != nullptr) return {};
    RLT_RETURN_IF_ERROR(cudnn_library::load().status());
    if (finished_ == nullptr) {
      RLT_RETURN_IF_ERROR(cuda::cuda_status(
          static_cast<int>(cudaEventCreateWithFlags(&finished_, cudaEventDisableTiming)),
          "cudnn: creating its completion event"));
    }
    const cudnnStatus_t s = cudnnCreate(&handle_);
    if (s != CUDNN_STATUS_SUCCESS) {
      handle_ = nullptr;
      return failed_precondition(
          fmt::format("cudnn: cudnnCreate failed: {}", cudnnGetErrorString(s)));
    }
    return {};
  }

  Result<Plan*> plan_for(const CudnnShape& shape, bool capturing) {
    auto it = plans_.find(shape);
    if (it != plans_.end()) return it->second.get();
    if (capturing) {
      // Building allocates device memory, which a stream capture forbids.
      return failed_precondition(fmt::format(
          "cudnn: {} was first seen inside a CUDA graph capture; run one eager call of that shape "
          "first",
          shape.describe()));
    }
    auto plan = std::make_unique<Plan>();
    RLT_ASSIGN_OR_RETURN(plan->graph, build_graph(shape, handle_));
    int64_t workspace = 0;
    fe::error_t e = plan->graph->get_workspace_size(workspace);
    if (e.is_bad()) return cudnn_error("reading the plan's workspace size", e);
    RLT_RETURN_IF_ERROR(
        evict_for(static_cast<size_t>(shape.staging_bytes() + std::max<int64_t>(workspace, 0))));
    const auto qo_bytes =
        static_cast<size_t>(shape.padded_rows() * shape.q_heads * shape.head_dim * 2);
    const auto seq_bytes = static_cast<size_t>(shape.batch * 4);
    RLT_ASSIGN_OR_RETURN(plan->q,
                         cuda::DeviceAllocation::allocate(qo_bytes, "cudnn staged queries"));
    RLT_ASSIGN_OR_RETURN(plan->o,
                         cuda::DeviceAllocation::allocate(qo_bytes, "cudnn staged output"));
    RLT_ASSIGN_OR_RETURN(plan->seq_len_q,
                         cuda::DeviceAllocation::allocate(seq_bytes, "cudnn query lengths"));
    RLT_ASSIGN_OR_RETURN(plan->seq_len_kv,
                         cuda::DeviceAllocation::allocate(seq_bytes, "cudnn context lengths"));
    RLT_ASSIGN_OR_RETURN(plan->page_table, cuda::DeviceAllocation::allocate(
                                               seq_bytes * shape.table_width, "cudnn page table"));
    if (workspace > 0) {
      RLT_ASSIGN_OR_RETURN(plan->workspace, cuda::DeviceAllocation::allocate(
                                                static_cast<size_t>(workspace), "cudnn workspace"));
    }
    Plan* raw = plan.get();
    plans_.emplace(shape, std::move(plan));
    return raw;
  }

  // Frees the least recently used plans no live CUDA graph refers to until `incoming` more bytes
  // fit the budget, once the last eager call (so every call of theirs) has finished: with
  // asynchronous scheduling one may still be running.
  Status evict_for(size_t incoming) {
    bool waited = false;
    for (;;) {
      size_t total = incoming;
      auto oldest = plans_.end();
      for (auto it = plans_.begin(); it != plans_.end(); ++it) {
        total += it->second->bytes();
        if (!it->second->captured &&
            (oldest == plans_.end() || it->second->last_use < oldest->second->last_use))
          oldest = it;
      }
      if (total <= kPlanMemoryBudget || oldest == plans_.end()) return {};
      if (!waited && finished_ != nullptr) {
        RLT_RETURN_IF_ERROR(cuda::cuda_status(static_cast<int>(cudaEventSynchronize(finished_)),
                                              "cudnn: waiting for calls before freeing a plan"));
        waited = true;
      }
      plans_.erase(oldest);
    }
  }

  // One cuDNN call; `capturing`: the stream is being captured into a CUDA graph.
  Status run_call(const AttentionParams& p, bool capturing) {
    RLT_ASSIGN_OR_RETURN(CudnnShape shape, cudnn_shape_of(p, staging_limit_));
    if (reinterpret_cast<uintptr_t>(p.k.base) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(p.v.base) % 16 != 0)
      return invalid_argument("cudnn: the K and V layer views must start 16-byte aligned");
    RLT_ASSIGN_OR_RETURN(cuda::ElementType element,
                         cuda::element_type_of(p.k.dtype, "cudnn: the K/V cache"));
    auto* stream = static_cast<cudaStream_t>(p.stream);
    if (!capturing) RLT_RETURN_IF_ERROR(start());
    // Plans' staging is shared by every call of a shape: before another stream uses it, the
    // previous call must have finished (a runner keeps one stream, so this never happens in
    // steady state or capture). The event, unlike the old stream, outlives its caller.
    if (stream != last_stream_ && used_ && !capturing) {
      RLT_RETURN_IF_ERROR(cuda::cuda_status(static_cast<int>(cudaEventSynchronize(finished_)),
                                            "cudnn: waiting for the previous stream's call"));
    }
    RLT_ASSIGN_OR_RETURN(Plan * plan, plan_for(shape, capturing));
    // A capture runs nothing now: the last eager call stays the one a stream switch waits for.
    if (!capturing) {
      last_stream_ = stream;
      used_ = true;
    }
    plan->last_use = ++uses_;
    plan->captured = plan->captured || capturing;

    cudnn_staging::Staging st;
    st.q = p.q;
    st.out = p.out;
    st.cu_seqlens_q = p.cu_seqlens_q;
    st.context_lengths = p.context_lengths;
    st.block_tables = p.block_tables;
    st.num_seqs = static_cast<int32_t>(p.num_seqs);
    st.table_width = p.table_width;
    st.block_size = p.k.block_size;
    st.q_heads = p.num_q_heads;
    st.head_dim = p.head_dim();
    st.element = element;
    st.batch = shape.batch;
    st.max_q = shape.max_q;
    st.padded_width = shape.table_width;
    st.q_padded = plan->q.data();
    st.o_padded = plan->o.data();
    st.seq_len_q = static_cast<int32_t*>(plan->seq_len_q.data());
    st.seq_len_kv = static_cast<int32_t*>(plan->seq_len_kv.data());
    st.page_table = static_cast<int32_t*>(plan->page_table.data());

    const cudnnStatus_t set = cudnnSetStream(handle_, stream);
    if (set != CUDNN_STATUS_SUCCESS) {
      return failed_precondition(
          fmt::format("cudnn: cudnnSetStream failed: {}", cudnnGetErrorString(set)));
    }
    RLT_RETURN_IF_ERROR(cudnn_staging::stage_inputs(st, stream));
    std::unordered_map<int64_t, void*> pack = {
        {kQ, plan->q.data()},
        {kK, p.k.base},
        {kV, p.v.base},
        {kO, plan->o.data()},
        {kSeqLenQ, plan->seq_len_q.data()},
        {kSeqLenKv, plan->seq_len_kv.data()},
        {kPageTable, plan->page_table.data()},
    };
    fe::error_t e = plan->graph->execute(handle_, pack, plan->workspace.data());
    if (e.is_bad()) return cudnn_error(fmt::format("running {}", shape.describe()), e);
    RLT_RETURN_IF_ERROR(cudnn_staging::unstage_output(st, stream));
    if (capturing) return {};
    return cuda::cuda_status(static_cast<int>(cudaEventRecord(finished_, stream)),
                             "cudnn: recording its completion event");
  }

  const int64_t staging_limit_;
  cudnnHandle_t handle_ = nullptr;
  cudaEvent_t finished_ = nullptr;  // recorded after each eager call
  std::unordered_map<CudnnShape, std::unique_ptr<Plan>, CudnnShapeHash> plans_;
  cudaStream_t last_stream_ = nullptr;
  bool used_ = false;
  uint64_t uses_ = 0;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cudnn_backend() {
  return std::make_unique<CudnnBackend>(kCudnnMaxStagingBytes);
}

std::unique_ptr<AttentionBackend> make_cudnn_backend_with_staging_limit(int64_t staging_limit) {
  return std::make_unique<CudnnBackend>(staging_limit);
}

Status validate_cudnn_graph(const CudnnShape& shape, int32_t sm_version) {
  RLT_RETURN_IF_ERROR(cudnn_library::load().status());
  try {
    for (const auto implementation :
         {fe::AttentionImplementation_t::AUTO, fe::AttentionImplementation_t::COMPOSITE}) {
      auto g = describe_graph(shape, sm_version, implementation);
      fe::error_t e = g->validate();
      if (e.is_bad()) {
        return cudnn_error(
            fmt::format(
                "cuDNN rejects {} on sm_{} ({} engine)", shape.describe(), sm_version,
                implementation == fe::AttentionImplementation_t::AUTO ? "automatic" : "composite"),
            e);
      }
    }
    return {};
  } catch (const std::exception& e) {
    return internal_error(fmt::format("cudnn: {}", e.what()));
  }
}

Result<CudnnPlanCount> count_cudnn_plans(const CudnnShape& shape, const std::string& device_json,
                                         int32_t sm_version) {
  RLT_RETURN_IF_ERROR(cudnn_library::load().status());
  try {
    auto device = std::make_shared<fe::DeviceProperties>();
    std::vector<uint8_t> json(device_json.begin(), device_json.end());
    fe::error_t e = device->deserialize(json);
    if (e.is_bad()) return cudnn_error("reading the device description", e);
    CudnnPlanCount count;
    for (const auto implementation :
         {fe::AttentionImplementation_t::AUTO, fe::AttentionImplementation_t::COMPOSITE}) {
      auto g = describe_graph(shape, sm_version, implementation, device);
      e = g->validate();
      if (e.is_good()) e = g->build_operation_graph();
      if (e.is_good()) e = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      if (e.is_good()) e = g->check_support();
      const int64_t plans = e.is_good() ? g->get_execution_plan_count() : 0;
      if (implementation == fe::AttentionImplementation_t::AUTO) {
        count.automatic = plans;
        if (e.is_bad()) count.automatic_error = e.get_message();
      } else {
        count.composite = plans;
        if (e.is_bad()) count.composite_error = e.get_message();
      }
    }
    return count;
  } catch (const std::exception& e) {
    return internal_error(fmt::format("cudnn: {}", e.what()));
  }
}

}  // namespace rlt::attention
