#include "attention/capabilities.h"

#include <fmt/format.h>

#include <algorithm>
#include <hwy/targets.h>

namespace rlt::attention {

std::string isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kSse4: return "sse4";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
    case CpuIsa::kNeon: return "neon";
  }
  return "?";
}

std::string DeviceDesc::to_string() const {
  if (kind == DeviceKind::kCuda) return fmt::format("cuda:sm_{}", sm);
  return "cpu:" + isa_name(isa);
}

Result<DeviceDesc> parse_device(const std::string& text) {
  const std::string usage =
      "expected cpu, cpu:<scalar|sse4|avx2|avx512|neon> or cuda:sm_<NN> (e.g. cuda:sm_89, cuda:sm_90)";
  DeviceDesc d;
  if (text == "cpu") return detect_host_cpu();
  if (text.rfind("cpu:", 0) == 0) {
    const std::string isa = text.substr(4);
    for (CpuIsa i : {CpuIsa::kScalar, CpuIsa::kSse4, CpuIsa::kAvx2, CpuIsa::kAvx512, CpuIsa::kNeon}) {
      if (isa == isa_name(i)) {
        d.isa = i;
        return d;
      }
    }
    return invalid_argument(fmt::format("unknown CPU level '{}' in device '{}'; {}", isa, text, usage));
  }
  if (text.rfind("cuda:sm_", 0) == 0) {
    std::string num = text.substr(8);
    if (!num.empty() && (num.back() == 'a' || num.back() == 'f')) num.pop_back();  // sm_90a
    if (!num.empty() && num.size() <= 3 && std::all_of(num.begin(), num.end(), ::isdigit)) {
      d.kind = DeviceKind::kCuda;
      d.sm = std::stoi(num);
      return d;
    }
  }
  return invalid_argument(fmt::format("cannot parse device '{}'; {}", text, usage));
}

DeviceDesc detect_host_cpu() {
  DeviceDesc d;
  const int64_t targets = hwy::SupportedTargets();
#if HWY_ARCH_X86
  if (targets & (HWY_AVX3 | HWY_AVX3_DL)) d.isa = CpuIsa::kAvx512;
  else if (targets & HWY_AVX2) d.isa = CpuIsa::kAvx2;
  else if (targets & HWY_SSE4) d.isa = CpuIsa::kSse4;
#elif HWY_ARCH_ARM
  if (targets & HWY_NEON) d.isa = CpuIsa::kNeon;
#else
  (void)targets;
#endif
  return d;
}

bool SizeRule::accepts(int32_t v) const {
  if (v < min || v > max || v % multiple_of != 0) return false;
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

std::string SizeRule::describe() const {
  if (!allowed.empty()) return fmt::format("one of {}", fmt::join(allowed, ", "));
  if (multiple_of > 1) return fmt::format("a multiple of {} in [{}, {}]", multiple_of, min, max);
  return fmt::format("in [{}, {}]", min, max);
}

}  // namespace rlt::attention
