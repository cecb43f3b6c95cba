// Parses --device and checks it against this build and machine, before any model bytes are read:
// "cpu", "cuda" (device 0) or "cuda:N". A CUDA choice in a build without CUDA, or without a
// usable device, is an error that says what to do.
#pragma once

#include <memory>
#include <string>

#include "attention/backend.h"
#include "attention/capabilities.h"
#include "kv/kv_types.h"
#include "model/ouro_weights.h"
#include "runner/model_runner.h"

namespace rlt::runner {

struct DeviceChoice {
  bool cuda = false;
  int cuda_index = 0;
  attention::DeviceDesc attention_device;  // what attention selection targets
};

Result<DeviceChoice> choose_device(const std::string& text);

// How the GPU runner executes (EngineConfig's GPU settings).
struct GpuRunnerSettings {
  CudaGraphs cuda_graphs = CudaGraphs::kAuto;
  bool programmatic_launch = false;  // sm_90+ only
  bool device_sampling = true;       // false: logits go to the host sampler
  // Buffers allocated when the runner is made, so that a configuration the device cannot hold
  // fails at startup instead of aborting the first batch that large mid-serving: activations for
  // `reserve_rows` rows (the largest batch), logits, sampling buffers and request states for
  // `reserve_sampling_rows` (max_num_seqs). 0: allocated on first use.
  int64_t reserve_rows = 0;
  int64_t reserve_sampling_rows = 0;
};

// The memory bandwidth a roofline is stated against on `device` ("cpu" or "cuda:N"): a copy
// probe counted as read + write, in GB/s; 0 when it cannot be measured.
double copy_bandwidth_gbs(const std::string& device);

// Free and total memory of CUDA device `device`, in bytes (an error without CUDA).
struct GpuMemoryInfo {
  int64_t free = 0, total = 0;
};
Result<GpuMemoryInfo> gpu_memory_info(int device);

// The GPU runner (gpu_model_runner.h) in CUDA builds; an error naming the build switch otherwise.
Result<std::unique_ptr<ModelRunner>> make_gpu_runner(
    std::shared_ptr<const model::OuroModel> model, const kv::KVGeometry& geometry, int device,
    std::unique_ptr<attention::AttentionBackend> backend,
    const attention::BackendCapabilities& caps, const GpuRunnerSettings& settings);

}  // namespace rlt::runner
