// An attention backend: one implementation of the contract in contract.h.
#pragma once

#include <memory>
#include <string_view>

#include "attention/contract.h"

namespace rlt::attention {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  virtual std::string_view name() const = 0;
  // `p` has passed validate_attention_params. Not thread-safe: one caller at a time (a backend
  // may keep scratch buffers between calls so that steady state allocates nothing). Errors are
  // device failures (a launch, a scratch allocation); CPU backends cannot fail.
  virtual Status run(const AttentionParams& p) = 0;
  // True for CUDA backends: every pointer in AttentionParams is a device pointer, and the host
  // copies of the metadata must be given for validation.
  virtual bool reads_device_memory() const { return false; }
  // The caller has destroyed every CUDA graph that captured this backend's calls: buffers a
  // backend keeps alive for captured graphs may go.
  virtual void release_captures() {}
};

// Plan/run for a model pass, whose layers all share one metadata (tables, lengths, grouping) and
// pool geometry: check_attention_pass validates it once, at planning (q and out are not read;
// device backends validate the host copies); run_checked_attention then runs each layer's call
// with that metadata and does no validation. A call whose metadata was not checked must go
// through run_attention.
Status check_attention_pass(const AttentionBackend& backend, const AttentionParams& p);
Status run_checked_attention(AttentionBackend& backend, const AttentionParams& p);

// Validates, then runs: one call on its own.
Status run_attention(AttentionBackend& backend, const AttentionParams& p);

std::unique_ptr<AttentionBackend> make_cpu_reference_backend();
std::unique_ptr<AttentionBackend> make_cpu_flash_backend();
// In builds with CUDA (attention/cuda_paged_backend.cpp); launches on AttentionParams::stream.
std::unique_ptr<AttentionBackend> make_cuda_paged_backend();
// In builds with cuDNN (attention/cudnn_backend.cpp); loads libcudnn.so.9 on its first call.
std::unique_ptr<AttentionBackend> make_cudnn_backend();

}  // namespace rlt::attention
