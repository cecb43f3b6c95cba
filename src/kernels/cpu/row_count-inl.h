// A row count known only at run time turned into a compile-time one: the kernels' tiles are
// compiled per row count (their accumulators are registers), so the rows a batch leaves over pick
// their instantiation here. Shared by the f32- and int8-activation kernels (linear_quant.cpp,
// linear_quant_int8.cpp); included inside their Highway target loop, hence the re-inclusion guard.
#if defined(RLT_KERNELS_CPU_ROW_COUNT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RLT_KERNELS_CPU_ROW_COUNT_INL_H_
#undef RLT_KERNELS_CPU_ROW_COUNT_INL_H_
#else
#define RLT_KERNELS_CPU_ROW_COUNT_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <type_traits>

HWY_BEFORE_NAMESPACE();
namespace rlt::kernels {
namespace HWY_NAMESPACE {

// f(std::integral_constant<int, rows>{}) when kMin <= rows <= kMax; nothing otherwise.
template <int kMin, int kMax, class F>
HWY_INLINE void WithRowCount(int64_t rows, F&& f) {
  if constexpr (kMax >= kMin) {
    if (rows == kMax) return f(std::integral_constant<int, kMax>{});
    WithRowCount<kMin, kMax - 1>(rows, f);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rlt::kernels
HWY_AFTER_NAMESPACE();

#endif  // RLT_KERNELS_CPU_ROW_COUNT_INL_H_
