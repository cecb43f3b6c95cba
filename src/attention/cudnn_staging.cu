#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/cudnn_staging.h"
#include "cuda/device.h"
#include "cuda/launch.cuh"

namespace rlt::attention::cudnn_staging {
namespace {

constexpr int kThreads = 128;

template <typename T>
__device__ T from_float(float x);
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// The packed row that fills padded place `slot` (sequence slot / max_q, row slot % max_q), or -1.
__device__ int64_t source_row(const Staging& s, int64_t slot) {
  const int64_t seq = slot / s.max_q;
  const int64_t j = slot % s.max_q;
  if (seq >= s.num_seqs) return -1;
  if (s.cu_seqlens_q == nullptr) return j == 0 ? seq : -1;
  const int64_t begin = s.cu_seqlens_q[seq];
  return j < s.cu_seqlens_q[seq + 1] - begin ? begin + j : -1;
}

// Blocks [0, batch * max_q) stage one padded query place each; the `batch` blocks after them
// stage one sequence's lengths and page table (one launch for both: it runs once per layer).
template <typename T>
__global__ void stage_inputs_kernel(Staging s) {
  ::rlt::cuda::wait_for_upstream_kernels();
  const int64_t places = s.batch * s.max_q;
  if (blockIdx.x < places) {
    const int64_t slot = blockIdx.x;
    const int64_t width = int64_t{s.q_heads} * s.head_dim;
    const int64_t row = source_row(s, slot);
    T* dst = static_cast<T*>(s.q_padded) + slot * width;
    if (row < 0) {
      for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = from_float<T>(0.0f);
      return;
    }
    const float* src = s.q + row * width;
    for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = from_float<T>(src[i]);
    return;
  }
  const int64_t seq = blockIdx.x - places;
  const bool real = seq < s.num_seqs;
  const int32_t context = real ? s.context_lengths[seq] : 1;
  if (threadIdx.x == 0) {
    s.seq_len_kv[seq] = context;
    s.seq_len_q[seq] =
        !real ? 1 : (s.cu_seqlens_q ? s.cu_seqlens_q[seq + 1] - s.cu_seqlens_q[seq] : 1);
  }
  const int32_t used = (context + s.block_size - 1) / s.block_size;
  for (int32_t w = threadIdx.x; w < s.padded_width; w += blockDim.x) {
    s.page_table[seq * s.padded_width + w] =
        real && w < used ? s.block_tables[seq * int64_t{s.table_width} + w] : 0;
  }
}

template <typename T>
__global__ void unstage_output_kernel(Staging s) {
  ::rlt::cuda::wait_for_upstream_kernels();
  const int64_t slot = blockIdx.x;
  const int64_t row = source_row(s, slot);
  if (row < 0) return;
  const int64_t width = int64_t{s.q_heads} * s.head_dim;
  const T* src = static_cast<const T*>(s.o_padded) + slot * width;
  float* dst = s.out + row * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) dst[i] = static_cast<float>(src[i]);
}

Status launched(const char* what) {
  return ::rlt::cuda::cuda_status(static_cast<int>(cudaGetLastError()), what);
}

}  // namespace

Status stage_inputs(const Staging& s, CUstream_st* stream) {
  const dim3 blocks(static_cast<unsigned>(s.batch * s.max_q + s.batch));
  if (s.element == cuda::ElementType::kF16) {
    (void)::rlt::cuda::launch(stage_inputs_kernel<__half>, blocks, kThreads, 0, stream, s);
  } else {
    (void)::rlt::cuda::launch(stage_inputs_kernel<__nv_bfloat16>, blocks, kThreads, 0, stream, s);
  }
  return launched("cudnn: staging the query rows, sequence lengths and page table");
}

Status unstage_output(const Staging& s, CUstream_st* stream) {
  const dim3 places(static_cast<unsigned>(s.batch * s.max_q));
  if (s.element == cuda::ElementType::kF16) {
    (void)::rlt::cuda::launch(unstage_output_kernel<__half>, places, kThreads, 0, stream, s);
  } else {
    (void)::rlt::cuda::launch(unstage_output_kernel<__nv_bfloat16>, places, kThreads, 0, stream, s);
  }
  return launched("cudnn: copying the output rows back");
}

}  // namespace rlt::attention::cudnn_staging
