// cuBLAS, loaded on first use. Linking it would run its libraries' static initialisers in every
// rlt process (about 50 ms and tens of MiB of touched memory at each start, CPU runs included);
// loaded here, only a GPU run pays, once.
#pragma once

#include <cublas_v2.h>

#include "rlt/status.h"

namespace rlt::cuda {

// The entry points rlt calls (cublas_v2.h's names map to these symbols).
struct CublasLibrary {
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetWorkspace) set_workspace = nullptr;
  // The C entry point (cublas_api.h adds a C++ overload taking the compute type as a data type).
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  GemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
};

// The library, loaded on the first call (thread-safe); an error says which library or symbol is
// missing and how to make it findable.
Result<const CublasLibrary*> cublas_library();

}  // namespace rlt::cuda
