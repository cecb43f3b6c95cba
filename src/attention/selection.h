// Backend selection: `auto` walks the registry's preference order and takes the first candidate
// that passes every check; an explicit name is checked the same way and never falls back. Either
// way the result is a report with a verdict, a stable reason code and a human message for every
// candidate. Selection loads nothing and allocates no KV: it runs before KV sizing and backs
// `rlt attention explain`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attention/capabilities.h"
#include "attention/registry.h"

namespace rlt::attention {

struct SelectionInput {
  std::string requested = "auto";  // "auto" or a backend name
  DeviceDesc device;
  DType kv_dtype = DType::kBF16;
  int32_t head_dim = 0;
  int32_t page_size = 16;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  Requirements requirements;
  // Hooks for simulation in tests and `explain`; defaults consult the build and dlopen.
  std::function<bool(const BackendEntry&)> is_built;
  std::function<bool(const std::string& library)> library_loads;
};

// Stable reason codes (part of the API: tests, logs and the HTTP report use them).
namespace reason {
inline constexpr const char* kSelected = "selected";
inline constexpr const char* kLowerPreference = "lower_preference";
inline constexpr const char* kNotRequested = "not_requested";
inline constexpr const char* kDeviceKind = "device_kind";
inline constexpr const char* kComputeCapability = "compute_capability";
inline constexpr const char* kCpuIsa = "cpu_isa";
inline constexpr const char* kKvDtype = "kv_dtype";
inline constexpr const char* kHeadDim = "head_dim";
inline constexpr const char* kPageSize = "page_size";
inline constexpr const char* kGqaRatio = "gqa_ratio";
inline constexpr const char* kNotBuilt = "not_built";
inline constexpr const char* kLibraryUnavailable = "library_unavailable";
inline constexpr const char* kMissingCapability = "missing_capability";  // + ":<flag>"
}  // namespace reason

struct CandidateVerdict {
  std::string backend;
  bool compatible = false;
  std::string code;     // first failing check, or selected / lower_preference / not_requested
  std::string message;  // every failing check with what would fix it
};

struct SelectionReport {
  std::string requested;
  std::string selected;  // empty when nothing fits
  std::string reason;    // why the winner won, or why nothing did
  std::string device;
  std::vector<CandidateVerdict> candidates;  // in preference order
  Status status;         // not ok when nothing fits or an explicit choice is incompatible

  std::string to_text() const;
  std::string to_json() const;  // {"requested", "selected", "reason", "device", "candidates": [...]}
};

SelectionReport select_attention_backend(const SelectionInput& input);

// Whether a shared library loads with dlopen (then unloads it).
bool shared_library_loads(const std::string& library);

}  // namespace rlt::attention
