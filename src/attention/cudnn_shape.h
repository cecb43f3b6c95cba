// The shape a `cudnn` attention call runs at: the call's sizes padded to power-of-two buckets, so
// that a handful of cuDNN plans (each built once, which takes a while) serve every call, and a CUDA
// graph captured at one bucket replays for every later call of that bucket. Host-only arithmetic,
// unit tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "attention/contract.h"

namespace rlt::attention {

struct CudnnShape {
  int64_t batch = 0;  // sequences, padded to a power of two (padding sequences: 1 query, 1 key)
  int32_t max_q = 1;  // query rows per sequence: 1 for single-query calls, else the next power
                      // of two >= max_seqlen_q (shorter sequences leave rows unused)
  int32_t table_width = 0;  // page-table entries per sequence, padded to a power of two
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int32_t q_heads = 0;
  int32_t kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::kBF16;  // of K/V, and of the staged Q and O cuDNN reads and writes
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;

  bool operator==(const CudnnShape&) const = default;

  // Causal masking only matters when a sequence has several query rows; a single query row sits
  // at the end of its context and sees every key.
  bool causal() const { return max_q > 1; }
  int64_t max_kv() const { return int64_t{table_width} * block_size; }
  int64_t padded_rows() const { return batch * max_q; }
  // Device bytes of one plan's staging: Q and O as [batch, max_q, q_heads, head_dim] in the K/V
  // type, the two per-sequence length vectors and the padded page table (cuDNN's workspace is
  // extra and known only once the plan is built).
  int64_t staging_bytes() const;
  std::string describe() const;
};

struct CudnnShapeHash {
  size_t operator()(const CudnnShape& s) const;
};

// The most staging one plan may hold: a call whose padding would need more is refused with a
// message, rather than allocating gigabytes for rows it never uses.
inline constexpr int64_t kCudnnMaxStagingBytes = int64_t{1} << 30;

// The bucketed shape of a validated call, or why cuDNN's attention cannot run it (K/V type,
// head_dim, strides, padding too large), each with what to do instead.
Result<CudnnShape> cudnn_shape_of(const AttentionParams& p,
                                  int64_t staging_limit = kCudnnMaxStagingBytes);

// Consecutive sequences [begin, end) of a call that run as one cuDNN call each: the whole call when
// its padded staging fits `staging_limit`, otherwise the longest runs that do (a step mixing
// many short sequences with a long prefill chunk would pad every one of them to the chunk).
// `host_cu_seqlens_q` is the host copy of the call's cu_seqlens_q (null for single-query rows).
// Errors only when one sequence alone does not fit.
struct SequenceRange {
  int64_t begin = 0, end = 0;
  int32_t max_q = 1;  // the longest query run in the range
};
Result<std::vector<SequenceRange>> cudnn_sequence_ranges(
    const AttentionParams& p, const int32_t* host_cu_seqlens_q,
    int64_t staging_limit = kCudnnMaxStagingBytes);

// Packed call `p` restricted to the sequences of `r` (device and host metadata both offset; q and
// out stay whole, since cu_seqlens_q holds absolute row offsets). The result is for the backend
// only: validate_attention_params would refuse it (its cu_seqlens_q does not start at 0), and it
// needs none, since run_attention validated the whole call.
AttentionParams sequence_range_params(const AttentionParams& p, const SequenceRange& r);

// In builds with cuDNN (cudnn_backend.cpp): the cudnn backend with another staging limit than
// kCudnnMaxStagingBytes (tests use a small one to exercise sequence ranges on small calls).
std::unique_ptr<AttentionBackend> make_cudnn_backend_with_staging_limit(int64_t staging_limit);

// In builds with cuDNN (cudnn_backend.cpp): loads cuDNN and runs the frontend's checks of the
// graph the backend would build for `shape` on an sm_<sm_version> GPU, with the engine the
// frontend picks and with the composite engine the backend falls back to (dims, strides, the
// paged table's width, mask support for the loaded cuDNN's version) — everything short of asking
// the GPU for a plan, so it runs without a device.
Status validate_cudnn_graph(const CudnnShape& shape, int32_t sm_version);

// In builds with cuDNN (9.8+ at run time): asks cuDNN itself, without a GPU, for execution-plan
// candidates of the graph the backend would build for `shape` on the GPU `device_json` describes
// (cuDNN's device-property JSON: SM count, shared memory, architecture as deviceVer, ...), with
// the engine the frontend picks and with the composite engine, and runs cuDNN's support check on
// them (no plan is finalized: that would load kernels). cuDNN compiles its runtime kernels to list
// those engines, which needs libcuda.so.1 to load (the toolkit's stub library does). Errors only
// when cuDNN or the description does not load; an engine whose candidates all fail (or that has
// none) reports 0 and cuDNN's reason. `sm_version` must match the description's deviceVer.
struct CudnnPlanCount {
  int64_t automatic = 0, composite = 0;
  std::string automatic_error, composite_error;
};
Result<CudnnPlanCount> count_cudnn_plans(const CudnnShape& shape, const std::string& device_json,
                                         int32_t sm_version);

}  // namespace rlt::attention
