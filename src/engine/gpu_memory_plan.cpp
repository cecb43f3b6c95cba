#include "engine/gpu_memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace rlt::engine {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double gib(int64_t bytes) {
  return static_cast<double>(bytes) / kGiB;
}

}  // namespace

GpuMemoryNeeds estimate_gpu_memory_needs(const io::ModelConfig& c, int64_t weight_bytes,
                                         int64_t max_rows, int64_t sampling_rows, bool cudnn) {
  GpuMemoryNeeds n;
  n.weights = weight_bytes;
  // Per row, f32 unless noted: the runner's hidden row and gate logit; the core's normed input,
  // q/k/v, q, attention output, sublayer output, gate/up and SwiGLU activations; the 16-bit GEMM
  // input scratch at the widest input.
  const int64_t f32_per_row = 1 + c.hidden_size + c.hidden_size + (c.q_dim() + 2 * c.kv_dim()) +
                              2 * c.q_dim() + c.hidden_size + 3 * c.intermediate_size;
  const int64_t scratch_per_row = 2 * std::max({c.hidden_size, c.intermediate_size, c.q_dim()});
  n.activations = 2 * max_rows * (4 * f32_per_row + scratch_per_row);
  // Logits, and the sampler's scratch at its largest (top-p sort keys in and out, work values,
  // penalized logits and log-normalizers): under 40 bytes per logit.
  n.sampling = 2 * sampling_rows * c.vocab_size * (4 + 40);
  // cuBLAS workspace (32 MiB), cuda_paged's split scratch (128 MiB), metadata and KV-copy
  // staging, with room; cuDNN's plans are held to 2 GiB.
  n.workspaces = (int64_t{512} << 20) + (cudnn ? int64_t{2} << 30 : 0);
  return n;
}

Result<GpuKvPlan> plan_gpu_kv_cache(const std::string& device, int64_t device_total,
                                    int64_t device_free, double utilization,
                                    const GpuMemoryNeeds& needs, int64_t bytes_per_block) {
  if (!(utilization > 0.0 && utilization <= 1.0)) {
    return invalid_argument(fmt::format(
        "--gpu-memory-utilization {}: expected a fraction of the device's memory in (0, 1]",
        utilization));
  }
  const auto allowed = static_cast<int64_t>(utilization * static_cast<double>(device_total));
  const int64_t in_use = std::max<int64_t>(0, device_total - device_free);
  const int64_t kv = allowed - in_use - needs.total();
  const std::string arithmetic = fmt::format(
      "{:.2f} x {:.1f} GiB on {} = {:.1f} GiB allowed; {:.1f} GiB already in use, weights "
      "{:.1f} GiB, activations {:.1f} GiB, logits and sampling {:.1f} GiB, workspaces {:.1f} GiB",
      utilization, gib(device_total), device, gib(allowed), gib(in_use), gib(needs.weights),
      gib(needs.activations), gib(needs.sampling), gib(needs.workspaces));
  if (kv < 2 * bytes_per_block) {  // one block for the cache, one for the pools' padding block
    return resource_exhausted(fmt::format(
        "no device memory is left for the KV cache: {} leave {:.2f} GiB; raise "
        "--gpu-memory-utilization, lower --max-num-batched-tokens or --max-num-seqs, free the "
        "device, or give the cache a size with --kv-cache-gib",
        arithmetic, gib(kv)));
  }
  GpuKvPlan plan;
  plan.kv_bytes = kv;
  plan.summary = fmt::format("{} leave {:.1f} GiB for the KV cache", arithmetic, gib(kv));
  return plan;
}

}  // namespace rlt::engine
