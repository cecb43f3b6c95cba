// Kernel tests run on every SIMD target compiled into the build and supported by this CPU
// (AVX-512, AVX2, SSE4, ...), not only the one dynamic dispatch picks here.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdint>

namespace rlt::kernels {

// Calls check(target) with dispatch pinned to each target in turn (under a trace naming it), then
// gives dispatch back its own choice.
template <typename Check>
void for_each_simd_target(Check check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    check(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace rlt::kernels
