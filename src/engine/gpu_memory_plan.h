// How much device memory a GPU run's KV cache gets when the user does not say
// (--gpu-memory-utilization, as in vLLM): the run may use that share of the device's memory, and
// the cache gets what is left of it after what was already in use when the engine started (the
// CUDA context, other processes), the model's weights, its activations at the largest batch, the
// logits and sampling scratch of the largest sampling batch, and fixed workspaces. Estimated
// before anything is allocated, from the configuration alone; pure arithmetic, tested on the CPU.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"
#include "rlt/status.h"

namespace rlt::engine {

struct GpuMemoryNeeds {
  int64_t weights = 0;  // the uploaded checkpoint tensors
  // Per-row buffers for the largest batch, twice: slack for what is not counted (CUDA graphs,
  // module code, request states), and for growth by doubling when buffers are not preallocated.
  int64_t activations = 0;
  int64_t sampling = 0;    // logits and device-sampling scratch for max_num_seqs rows, twice
  int64_t workspaces = 0;  // cuBLAS, split-K scratch, staging, cuDNN plans when that backend runs
  int64_t total() const { return weights + activations + sampling + workspaces; }
};

// `max_rows`: the most rows one batch can have (max_num_batched_tokens, or max_num_seqs when
// larger); `sampling_rows`: the most rows sampled at once (max_num_seqs).
GpuMemoryNeeds estimate_gpu_memory_needs(const io::ModelConfig& c, int64_t weight_bytes,
                                         int64_t max_rows, int64_t sampling_rows, bool cudnn);

struct GpuKvPlan {
  int64_t kv_bytes = 0;
  std::string summary;  // the arithmetic, for the log
};

// The KV cache's share: utilization × total − (total − free) − needs. An error with the numbers
// and the ways out when that is less than two blocks (one for the cache, one for the device pools'
// padding block), or when utilization is not in (0, 1].
Result<GpuKvPlan> plan_gpu_kv_cache(const std::string& device, int64_t device_total,
                                    int64_t device_free, double utilization,
                                    const GpuMemoryNeeds& needs, int64_t bytes_per_block);

}  // namespace rlt::engine
