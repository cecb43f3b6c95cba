// cuda_paged: the AttentionBackend over the kernels in cuda_paged.cu. Owns the split-row scratch:
// one fixed buffer allocated on first use and never reallocated, so a captured CUDA graph keeps
// pointing at live memory (make one eager call before capturing: allocating inside a capture is
// refused).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "attention/backend.h"
#include "attention/cuda_paged_kernels.h"
#include "attention/cuda_paged_plan.h"
#include "cuda/device.h"
#include "cuda/element_type.h"
#include "cuda/runtime.h"

namespace rlt::attention {
namespace {

// The partial-state scratch; calls whose split rows need more run in row slices under it.
constexpr int64_t kScratchBytes = int64_t{128} << 20;

// The kernels load 8 elements per lane with 16-byte loads.
Status check_view(const PagedKVLayerView& v, const char* which) {
  const bool aligned = reinterpret_cast<uintptr_t>(v.base) % 16 == 0 && v.block_stride % 8 == 0 &&
                       v.token_stride % 8 == 0 && v.head_stride % 8 == 0;
  if (!aligned) {
    return invalid_argument(
        fmt::format("cuda_paged: the {} view must be 16-byte aligned with strides that are "
                    "multiples of 8 elements (got strides {}, {}, {})",
                    which, v.block_stride, v.token_stride, v.head_stride));
  }
  return {};
}

class CudaPagedBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "cuda_paged"; }
  bool reads_device_memory() const override { return true; }

  Status run(const AttentionParams& p) override {
    const int32_t d = p.head_dim();
    if (!cuda_paged::head_dim_supported(d)) {
      return invalid_argument(
          fmt::format("cuda_paged: head_dim {} is not a multiple of 8 in [8, 256]", d));
    }
    RLT_RETURN_IF_ERROR(check_view(p.k, "K"));
    RLT_RETURN_IF_ERROR(check_view(p.v, "V"));
    // q is read 16 bytes at a time, out written 8 bytes at a time by the tensor-core prefill.
    if (reinterpret_cast<uintptr_t>(p.q) % 16 != 0 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0)
      return invalid_argument("cuda_paged: q and out must be 16-byte aligned");
    // The prefill grids are sized by max_seqlen_q: a bound above the call's rows is a caller error.
    if (p.cu_seqlens_q != nullptr && (p.max_seqlen_q < 1 || p.max_seqlen_q > p.rows)) {
      return invalid_argument(
          fmt::format("cuda_paged: max_seqlen_q {} is outside [1, {}] (the call's query rows)",
                      p.max_seqlen_q, p.rows));
    }
    RLT_ASSIGN_OR_RETURN(cuda::ElementType element,
                         cuda::element_type_of(p.k.dtype, "cuda_paged: the K/V cache"));

    RLT_ASSIGN_OR_RETURN(
        const bool capturing,
        cuda::stream_is_capturing(static_cast<cuda::StreamHandle>(p.stream), "cuda_paged"));

    cuda_paged::PagedLaunch l;
    l.q = p.q;
    l.out = p.out;
    l.k = p.k.base;
    l.v = p.v.base;
    l.k_block_stride = p.k.block_stride;
    l.k_token_stride = p.k.token_stride;
    l.k_head_stride = p.k.head_stride;
    l.v_block_stride = p.v.block_stride;
    l.v_token_stride = p.v.token_stride;
    l.v_head_stride = p.v.head_stride;
    l.kv_element = element;
    l.num_q_heads = p.num_q_heads;
    l.num_kv_heads = p.num_kv_heads();
    l.head_dim = d;
    l.block_size = p.k.block_size;
    l.block_tables = p.block_tables;
    l.table_width = p.table_width;
    l.context_lengths = p.context_lengths;
    l.cu_seqlens_q = p.cu_seqlens_q;
    l.num_seqs = static_cast<int32_t>(p.num_seqs);
    l.max_seqlen_q = p.max_seqlen_q;
    l.by_sequence = p.cu_seqlens_q != nullptr;
    l.units = l.by_sequence ? p.num_seqs * cuda_paged::kMaxDecodeRows : p.rows;
    // A packed call whose sequences all take the prefill kernel launches no decode blocks (they
    // would all return at once) when its host metadata says so; a capture keeps the grid (its
    // replays may see other lengths).
    if (l.by_sequence && !capturing && p.host_cu_seqlens_q != nullptr) {
      bool any_decode_rows = false;
      for (int64_t s = 0; s < p.num_seqs && !any_decode_rows; ++s) {
        any_decode_rows =
            p.host_cu_seqlens_q[s + 1] - p.host_cu_seqlens_q[s] <= cuda_paged::kMaxDecodeRows;
      }
      if (!any_decode_rows) l.units = 0;
    }
    // Sized from shapes only (capacity, not lengths), so the same call shape always launches the
    // same grid.
    l.max_partitions = cuda_paged::max_partitions(int64_t{p.table_width} * p.k.block_size);
    l.rows_per_launch = l.units;
    if (l.max_partitions > 1) {
      const int64_t row_bytes =
          int64_t{p.num_q_heads} * l.max_partitions * (d + 2) * int64_t{sizeof(float)};
      if (row_bytes > kScratchBytes) {
        return invalid_argument(
            fmt::format("cuda_paged: {} query heads need {} bytes of split scratch per row, "
                        "more than the {} the backend holds",
                        p.num_q_heads, row_bytes, kScratchBytes));
      }
      if (!scratch_.data()) {
        if (capturing) {
          return failed_precondition(
              "cuda_paged: the first call that splits keys was made inside a CUDA graph capture, "
              "where its scratch cannot be allocated; make one eager call of the shape first");
        }
        RLT_ASSIGN_OR_RETURN(
            scratch_, cuda::DeviceAllocation::allocate(kScratchBytes, "cuda_paged split scratch"));
      }
      l.rows_per_launch = std::min<int64_t>(kScratchBytes / row_bytes, l.units);
      const int64_t states = l.rows_per_launch * p.num_q_heads * l.max_partitions;
      l.partial_acc = static_cast<float*>(scratch_.data());
      l.partial_ml = l.partial_acc + states * d;
    }
    auto* stream = static_cast<CUstream_st*>(p.stream);
    // The scratch is shared by every call: before another stream uses it, the previous stream's
    // call must have finished (a runner keeps one stream, so this never waits in steady state).
    // The event, unlike the old stream, outlives its owner; a capture runs nothing now, so it
    // neither waits nor becomes the call to wait for.
    if (!capturing) {
      if (finished_ != nullptr && stream != last_stream_) {
        RLT_RETURN_IF_ERROR(
            cuda::cuda_status(static_cast<int>(cudaEventSynchronize(finished_)),
                              "cuda_paged: waiting for the previous stream's call"));
      }
      last_stream_ = stream;
    }
    RLT_RETURN_IF_ERROR(cuda_paged::launch_paged_attention(l, stream));
    if (capturing) return {};
    if (finished_ == nullptr) {
      RLT_RETURN_IF_ERROR(cuda::cuda_status(
          static_cast<int>(cudaEventCreateWithFlags(&finished_, cudaEventDisableTiming)),
          "cuda_paged: creating its completion event"));
    }
    return cuda::cuda_status(static_cast<int>(cudaEventRecord(finished_, stream)),
                             "cuda_paged: recording its completion event");
  }

  ~CudaPagedBackend() override {
    if (finished_ != nullptr) cudaEventDestroy(finished_);
  }

 private:
  cuda::DeviceAllocation scratch_;
  CUstream_st* last_stream_ = nullptr;
  cudaEvent_t finished_ = nullptr;  // recorded after each eager call
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_paged_backend() {
  return std::make_unique<CudaPagedBackend>();
}

}  // namespace rlt::attention
