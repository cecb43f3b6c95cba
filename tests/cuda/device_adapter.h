// Runs a device-memory attention backend on host-memory params: uploads q, the K/V pools and the
// metadata, runs the backend with device pointers (and the host metadata for validation), and
// copies the output back. Lets the shared equivalence suite drive CUDA backends unchanged.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "attention/backend.h"
#include "cuda/device.h"
#include "cuda/runtime.h"

namespace rlt::attention::testing {

class DeviceAdapter final : public AttentionBackend {
 public:
  explicit DeviceAdapter(std::unique_ptr<AttentionBackend> device_backend)
      : inner_(std::move(device_backend)) {}

  std::string_view name() const override { return inner_->name(); }

  Status run(const AttentionParams& p) override {
    const size_t qo_bytes =
        static_cast<size_t>(p.rows) * p.num_q_heads * p.head_dim() * sizeof(float);
    const size_t pool_bytes =
        static_cast<size_t>(p.k.num_blocks) * p.k.block_stride * dtype_size(p.k.dtype);
    const size_t table_bytes = static_cast<size_t>(p.num_seqs) * p.table_width * sizeof(int32_t);
    const size_t lengths_bytes = static_cast<size_t>(p.num_seqs) * sizeof(int32_t);
    RLT_ASSIGN_OR_RETURN(auto q, cuda::DeviceAllocation::allocate(qo_bytes, "test q"));
    RLT_ASSIGN_OR_RETURN(auto out, cuda::DeviceAllocation::allocate(qo_bytes, "test out"));
    RLT_ASSIGN_OR_RETURN(auto k, cuda::DeviceAllocation::allocate(pool_bytes, "test K"));
    RLT_ASSIGN_OR_RETURN(auto v, cuda::DeviceAllocation::allocate(pool_bytes, "test V"));
    RLT_ASSIGN_OR_RETURN(auto tables, cuda::DeviceAllocation::allocate(table_bytes, "test tables"));
    RLT_ASSIGN_OR_RETURN(auto lengths,
                         cuda::DeviceAllocation::allocate(lengths_bytes, "test lengths"));
    RLT_ASSIGN_OR_RETURN(
        auto cu, cuda::DeviceAllocation::allocate(lengths_bytes + sizeof(int32_t), "test cu"));
    RLT_RETURN_IF_ERROR(upload(q.data(), p.q, qo_bytes));
    RLT_RETURN_IF_ERROR(upload(k.data(), p.k.base, pool_bytes));
    RLT_RETURN_IF_ERROR(upload(v.data(), p.v.base, pool_bytes));
    RLT_RETURN_IF_ERROR(upload(tables.data(), p.block_tables, table_bytes));
    RLT_RETURN_IF_ERROR(upload(lengths.data(), p.context_lengths, lengths_bytes));
    if (p.cu_seqlens_q)
      RLT_RETURN_IF_ERROR(upload(cu.data(), p.cu_seqlens_q, lengths_bytes + sizeof(int32_t)));
    // NaN-filled so an output the kernel never writes cannot pass.
    RLT_RETURN_IF_ERROR(
        cuda::cuda_status(cudaMemset(out.data(), 0xff, qo_bytes), "test output fill"));

    AttentionParams d = p;
    d.q = static_cast<const float*>(q.data());
    d.out = static_cast<float*>(out.data());
    d.k.base = k.data();
    d.v.base = v.data();
    d.block_tables = static_cast<const int32_t*>(tables.data());
    d.context_lengths = static_cast<const int32_t*>(lengths.data());
    d.cu_seqlens_q = p.cu_seqlens_q ? static_cast<const int32_t*>(cu.data()) : nullptr;
    d.host_block_tables = p.block_tables;
    d.host_context_lengths = p.context_lengths;
    d.host_cu_seqlens_q = p.cu_seqlens_q;
    RLT_RETURN_IF_ERROR(run_attention(*inner_, d));
    RLT_RETURN_IF_ERROR(cuda::cuda_status(cudaDeviceSynchronize(), "attention kernels"));
    return cuda::cuda_status(cudaMemcpy(p.out, out.data(), qo_bytes, cudaMemcpyDeviceToHost),
                             "test output copy");
  }

 private:
  static Status upload(void* dst, const void* src, size_t bytes) {
    return cuda::cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "test upload");
  }
  std::unique_ptr<AttentionBackend> inner_;
};

}  // namespace rlt::attention::testing
