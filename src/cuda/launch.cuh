// Kernel launches that honour the stream's programmatic-dependent-launch setting
// (cuda/programmatic_launch.h). Every kernel launched through launch() must call
// wait_for_upstream_kernels() before it touches global memory: with PDL the kernel may start
// while the previous one is still running, and that call is what orders them again.
#pragma once

#include <cuda_runtime.h>

#include "cuda/programmatic_launch.h"

namespace rlt::cuda {

// Waits until the kernels before this one on the stream have completed and their writes are
// visible, then lets the next kernel begin launching (its blocks wait in turn). Both are no-ops
// when the kernel was launched without PDL, and compiled out before sm_90.
__device__ __forceinline__ void wait_for_upstream_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = programmatic_launch_enabled(stream) ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

}  // namespace rlt::cuda
