#include "attention/selection.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace rlt::attention {
namespace {

bool isa_satisfies(CpuIsa have, CpuIsa need) {
  if (need == CpuIsa::kScalar) return true;
  if (have == CpuIsa::kNeon)
    return need == CpuIsa::kNeon || need == CpuIsa::kSse4;  // baseline SIMD
  if (need == CpuIsa::kNeon) return false;
  return static_cast<int>(have) >= static_cast<int>(need);
}

std::string device_name(DeviceKind k) {
  return k == DeviceKind::kCuda ? "a CUDA GPU" : "the CPU";
}

std::string dtype_list(const std::vector<DType>& ds) {
  std::vector<std::string> names;
  for (DType d : ds) names.emplace_back(dtype_name(d));
  return fmt::format("{}", fmt::join(names, ", "));
}

int32_t nearest_accepted(const SizeRule& rule, int32_t v) {
  if (!rule.allowed.empty()) {
    int32_t best = rule.allowed.front();
    for (int32_t a : rule.allowed)
      if (std::abs(a - v) < std::abs(best - v)) best = a;
    return best;
  }
  int32_t up = std::max(rule.min, (v + rule.multiple_of - 1) / rule.multiple_of * rule.multiple_of);
  return std::min(up, rule.max / rule.multiple_of * rule.multiple_of);
}

struct Failure {
  std::string code;
  std::string message;
};

std::vector<Failure> check_candidate(const BackendEntry& e, const SelectionInput& in) {
  std::vector<Failure> f;
  const BackendCapabilities& c = e.caps;
  if (c.device != in.device.kind) {
    f.push_back({reason::kDeviceKind, fmt::format("runs on {}, but the device is {}",
                                                  device_name(c.device), in.device.to_string())});
    return f;  // nothing else is meaningful across device kinds
  }
  if (c.device == DeviceKind::kCuda) {
    if (in.device.sm < c.min_sm || (c.max_sm && in.device.sm > c.max_sm)) {
      f.push_back({reason::kComputeCapability,
                   c.max_sm == c.min_sm
                       ? fmt::format("needs compute capability sm_{} exactly, the device is sm_{}",
                                     c.min_sm, in.device.sm)
                   : c.max_sm
                       ? fmt::format("needs compute capability sm_{}..sm_{}, the device is sm_{}",
                                     c.min_sm, c.max_sm, in.device.sm)
                       : fmt::format("needs compute capability sm_{} or newer, the device is sm_{}",
                                     c.min_sm, in.device.sm)});
    }
  } else if (!isa_satisfies(in.device.isa, c.min_isa)) {
    f.push_back({reason::kCpuIsa, fmt::format("needs a CPU with {} or better, this one offers {}",
                                              isa_name(c.min_isa), isa_name(in.device.isa))});
  }
  if (std::find(c.kv_dtypes.begin(), c.kv_dtypes.end(), in.kv_dtype) == c.kv_dtypes.end()) {
    f.push_back({reason::kKvDtype,
                 fmt::format("supports K/V in {}, not {}; choose one of those with --kv-dtype",
                             dtype_list(c.kv_dtypes), dtype_name(in.kv_dtype))});
  }
  if (!c.head_dim.accepts(in.head_dim)) {
    f.push_back({reason::kHeadDim, fmt::format("supports head_dim {}, the model has {}",
                                               c.head_dim.describe(), in.head_dim)});
  }
  if (!c.page_size.accepts(in.page_size)) {
    f.push_back(
        {reason::kPageSize, fmt::format("supports pages of {} tokens, not {}; use --block-size {}",
                                        c.page_size.describe(), in.page_size,
                                        nearest_accepted(c.page_size, in.page_size))});
  }
  const int32_t ratio = in.num_kv_heads > 0 ? in.num_q_heads / in.num_kv_heads : 0;
  if (in.num_kv_heads <= 0 || in.num_q_heads % in.num_kv_heads != 0 ||
      !c.gqa_ratio.accepts(ratio)) {
    f.push_back(
        {reason::kGqaRatio, fmt::format("supports query/kv head ratios {}, the model has {}/{}",
                                        c.gqa_ratio.describe(), in.num_q_heads, in.num_kv_heads)});
  }
  const std::pair<bool, const char*> needs[] = {
      {in.requirements.packed_prefill && !c.packed_prefill, "packed_prefill"},
      {in.requirements.cuda_graphs && !c.cuda_graph_safe, "cuda_graphs"},
      {in.requirements.async_scheduling && !c.async_safe, "async_scheduling"},
      {in.requirements.deterministic && !c.deterministic, "deterministic"},
  };
  for (const auto& [missing, flag] : needs) {
    if (missing) {
      f.push_back({fmt::format("{}:{}", reason::kMissingCapability, flag),
                   fmt::format("does not declare {}, which the run requires; drop that requirement "
                               "or pick a backend "
                               "that declares it",
                               flag)});
    }
  }
  const bool built = in.is_built ? in.is_built(e) : e.built;
  if (!built) {
    f.push_back(
        {reason::kNotBuilt, fmt::format("is not compiled into this build; {}", e.build_hint)});
  } else if (!e.library.empty()) {
    if (!in.library_loads && e.library_check) {
      const Status usable = e.library_check();
      if (!usable.ok()) f.push_back({reason::kLibraryUnavailable, usable.message()});
    } else if (!(in.library_loads ? in.library_loads(e.library)
                                  : shared_library_loads(e.library))) {
      f.push_back(
          {reason::kLibraryUnavailable,
           fmt::format(
               "needs {}, which does not load; install it where the dynamic loader finds it "
               "(ldconfig or LD_LIBRARY_PATH)",
               e.library)});
    }
  }
  return f;
}

std::string joined(const std::vector<Failure>& f) {
  std::vector<std::string> parts;
  for (const auto& x : f) parts.push_back(x.message);
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

bool shared_library_loads(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) return false;
  ::dlclose(handle);
  return true;
}

SelectionReport select_attention_backend(const SelectionInput& in) {
  SelectionReport report;
  report.requested = in.requested;
  report.device = in.device.to_string();
  const bool automatic = in.requested == "auto";
  if (!automatic && find_backend(in.requested) == nullptr) {
    std::vector<std::string> names = {"auto"};
    for (const auto& e : backend_registry()) names.push_back(e.name);
    report.reason = fmt::format("unknown attention backend '{}'", in.requested);
    report.status = invalid_argument(fmt::format(
        "unknown attention backend '{}'; choose one of: {}", in.requested, fmt::join(names, ", ")));
    return report;
  }
  std::vector<std::string> rejections;
  for (const auto& e : backend_registry()) {
    CandidateVerdict v;
    v.backend = e.name;
    auto failures = check_candidate(e, in);
    v.compatible = failures.empty();
    if (!failures.empty()) {
      v.code = failures.front().code;
      v.message = fmt::format("{} {}", e.name, joined(failures));
    }
    const bool considered = automatic || e.name == in.requested;
    if (v.compatible) {
      if (considered && report.selected.empty()) {
        report.selected = e.name;
        v.code = reason::kSelected;
        v.message = automatic
                        ? fmt::format("{}: first compatible backend in the preference order for {}",
                                      e.name, report.device)
                        : fmt::format("{}: explicitly requested and compatible", e.name);
        report.reason = v.message;
      } else {
        v.code = considered ? reason::kLowerPreference : reason::kNotRequested;
        v.message = considered
                        ? fmt::format("{}: compatible, but {} comes first in the preference order",
                                      e.name, report.selected)
                        : fmt::format("{}: compatible (not requested)", e.name);
      }
    } else if (considered && e.caps.device == in.device.kind) {
      rejections.push_back(v.message);
    }
    report.candidates.push_back(std::move(v));
  }
  if (!report.selected.empty()) {
    if (automatic && !rejections.empty())
      report.reason += fmt::format(" (skipped: {})", fmt::join(rejections, "; "));
    return report;
  }
  if (automatic) {
    std::vector<std::string> all;
    for (const auto& c : report.candidates) all.push_back(c.message);
    report.reason = "no attention backend fits this run";
    report.status = failed_precondition(fmt::format("no attention backend fits this run on {}: {}",
                                                    report.device, fmt::join(all, "; ")));
  } else {
    const auto it =
        std::find_if(report.candidates.begin(), report.candidates.end(),
                     [&](const CandidateVerdict& c) { return c.backend == in.requested; });
    report.reason = it->message;
    std::vector<std::string> alternatives;
    for (const auto& c : report.candidates)
      if (c.compatible) alternatives.push_back(c.backend);
    const std::string hint =
        alternatives.empty() ? "no backend fits this run as configured"
                             : fmt::format("compatible here: {}", fmt::join(alternatives, ", "));
    report.status = failed_precondition(
        fmt::format("attention backend '{}' was requested but cannot run here: {} "
                    "(no fallback; {}, or 'auto')",
                    in.requested, it->message, hint));
  }
  return report;
}

std::string SelectionReport::to_text() const {
  std::string out = fmt::format("attention backend: {} (requested {}, device {})\n",
                                selected.empty() ? "none" : selected, requested, device);
  out += fmt::format("reason: {}\n", reason);
  out += "candidates (preference order):\n";
  for (const auto& c : candidates) {
    out += fmt::format("  {:<14} {:<11} {:<34} {}\n", c.backend,
                       c.compatible ? "compatible" : "rejected", c.code, c.message);
  }
  return out;
}

std::string SelectionReport::to_json() const {
  nlohmann::ordered_json j;
  j["requested"] = requested;
  j["selected"] = selected.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(selected);
  j["reason"] = reason;
  j["device"] = device;
  j["candidates"] = nlohmann::ordered_json::array();
  for (const auto& c : candidates) {
    j["candidates"].push_back({{"backend", c.backend},
                               {"compatible", c.compatible},
                               {"code", c.code},
                               {"message", c.message}});
  }
  if (!status.ok()) j["error"] = status.message();
  return j.dump(2);
}

}  // namespace rlt::attention
