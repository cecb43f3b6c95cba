// Per-target vector geometry of a 64-output panel, shared by the kernels that walk panels
// (linear.cpp, linear_quant.cpp). Included from Highway dispatch units inside their target loop,
// hence the Highway re-inclusion guard instead of #pragma once.
#if defined(RLT_KERNELS_CPU_PANEL_LANES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RLT_KERNELS_CPU_PANEL_LANES_INL_H_
#undef RLT_KERNELS_CPU_PANEL_LANES_INL_H_
#else
#define RLT_KERNELS_CPU_PANEL_LANES_INL_H_
#endif

#include <hwy/highway.h>

#include "kernels/cpu/packed_matrix.h"

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {

constexpr int64_t kPanel = PackedMatrix::kPanelWidth;

// f32 lanes per vector: whole vectors on fixed-width targets (capped at 16, AVX-512), 128 bits on
// scalable ones (always available there).
#if HWY_HAVE_SCALABLE
constexpr int64_t kLanes = 4;
#else
constexpr int64_t kLanes = HWY_LANES(float) < 16 ? HWY_LANES(float) : 16;
#endif
using DF = hwy::HWY_NAMESPACE::FixedTag<float, kLanes>;
using VF = hwy::HWY_NAMESPACE::Vec<DF>;
constexpr int kVectors = static_cast<int>(kPanel / kLanes);  // vectors per panel row

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#endif  // RLT_KERNELS_CPU_PANEL_LANES_INL_H_
