// CUDA runtime results as Status in the runner's GPU sources (cuda/device.h takes the error as an
// int to keep the runtime's headers out of its own).
#pragma once

#include <cuda_runtime.h>

#include "cuda/device.h"

namespace rlt::runner {

inline Status cuda_check(cudaError_t e, const char* what) {
  return cuda::cuda_status(static_cast<int>(e), what);
}

}  // namespace rlt::runner
