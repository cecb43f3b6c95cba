// The SwiGLU activation, silu(gate) · up, as one inline expression: the standalone kernel and the
// GEMV that fuses it must round identically, so both take it from here.
#pragma once

namespace rlt::cuda {

__device__ __forceinline__ float swiglu(float gate, float up) {
  return gate / (1.0f + expf(-gate)) * up;
}

}  // namespace rlt::cuda
