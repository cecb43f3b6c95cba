// What a backend declares it can do, as data. Selection and every caller route on these
// declarations only, never on backend names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "rlt/status.h"

namespace rlt::attention {

enum class DeviceKind { kCpu, kCuda };

// CPU SIMD levels in increasing order on x86; NEON stands for Arm.
enum class CpuIsa { kScalar, kSse4, kAvx2, kAvx512, kNeon };

// The device a run targets (detected, or simulated with --assume-device).
struct DeviceDesc {
  DeviceKind kind = DeviceKind::kCpu;
  CpuIsa isa = CpuIsa::kScalar;  // CPU only
  int sm = 0;                    // CUDA only: compute capability x 10 (89, 90, 100, 120)

  std::string to_string() const;  // "cpu:avx2", "cuda:sm_90"
};

// "cpu", "cpu:avx2", "cpu:avx512", "cpu:sse4", "cpu:neon", "cpu:scalar", "cuda:sm_80", "cuda:sm_90".
Result<DeviceDesc> parse_device(const std::string& text);
// This machine's CPU, with the best SIMD level the kernels' dispatcher will use.
DeviceDesc detect_host_cpu();
std::string isa_name(CpuIsa isa);

// An integer constraint: in [min, max], a multiple of `multiple_of`, and one of `allowed` when
// that list is not empty.
struct SizeRule {
  int32_t min = 1;
  int32_t max = 1 << 30;
  int32_t multiple_of = 1;
  std::vector<int32_t> allowed;

  bool accepts(int32_t v) const;
  std::string describe() const;  // "multiple of 8 in [8, 256]" or "one of 16, 32, 64"
};

struct BackendCapabilities {
  DeviceKind device = DeviceKind::kCpu;
  CpuIsa min_isa = CpuIsa::kScalar;  // CPU: lowest SIMD level (NEON satisfies only kNeon/kScalar)
  int min_sm = 0;                    // CUDA: lowest compute capability x 10
  int max_sm = 0;                    // CUDA: highest (0 = no limit), e.g. 90 for sm_90a kernels
  std::vector<DType> kv_dtypes;
  SizeRule head_dim;
  SizeRule page_size;
  SizeRule gqa_ratio;                // num_q_heads / num_kv_heads
  bool packed_prefill = false;       // ragged multi-row sequences in one call
  bool cuda_graph_safe = false;      // fixed shapes; lengths and tables read from device memory
  bool async_safe = false;           // never synchronizes with the host
  bool deterministic = false;        // a row's output does not depend on the rest of the batch
};

// What the run needs beyond the shape: each true flag filters out backends that lack it.
struct Requirements {
  bool packed_prefill = false;
  bool cuda_graphs = false;
  bool async_scheduling = false;
  bool deterministic = false;
};

}  // namespace rlt::attention
