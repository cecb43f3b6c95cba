#include <cuda_runtime.h>

#include "cuda/device.h"
#include "cuda/launch.cuh"
#include "pdl_probe.h"

namespace rlt::cuda::testing {
namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Lets the dependent launch, then keeps it waiting ~2 ms before writing.
__global__ void producer_kernel(int32_t* value, uint64_t* finished_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const uint64_t start = global_ns();
  while (global_ns() - start < 2'000'000) {
  }
  *value = 42;
  __threadfence();
  *finished_ns = global_ns();
}

__global__ void consumer_kernel(const int32_t* value, uint64_t* started_ns, int32_t* seen) {
  *started_ns = global_ns();  // touches nothing the producer writes
  wait_for_upstream_kernels();
  *seen = *value;
}

}  // namespace

Result<PdlProbe> run_pdl_probe(CUstream_st* stream) {
  struct Words {
    int32_t value, seen;
    uint64_t finished_ns, started_ns;
  };
  Words* d = nullptr;
  RLT_RETURN_IF_ERROR(cuda_status(static_cast<int>(cudaMalloc(&d, sizeof(Words))), "probe"));
  Words h{};
  const Status s = [&]() -> Status {
    RLT_RETURN_IF_ERROR(
        cuda_status(static_cast<int>(cudaMemsetAsync(d, 0, sizeof(Words), stream)), "probe"));
    producer_kernel<<<1, 1, 0, stream>>>(&d->value, &d->finished_ns);
    RLT_RETURN_IF_ERROR(cuda_status(static_cast<int>(cudaGetLastError()), "probe producer"));
    RLT_RETURN_IF_ERROR(
        cuda_status(static_cast<int>(launch(consumer_kernel, dim3(1), dim3(1), 0, stream, &d->value,
                                            &d->started_ns, &d->seen)),
                    "probe consumer"));
    RLT_RETURN_IF_ERROR(cuda_status(
        static_cast<int>(cudaMemcpyAsync(&h, d, sizeof(Words), cudaMemcpyDeviceToHost, stream)),
        "probe read"));
    return cuda_status(static_cast<int>(cudaStreamSynchronize(stream)), "probe");
  }();
  cudaFree(d);
  RLT_RETURN_IF_ERROR(s);
  return PdlProbe{h.seen, h.started_ns < h.finished_ns};
}

}  // namespace rlt::cuda::testing
