// Linear layers on the GPU: y[rows, out] = x[rows, in] · Wᵀ with W stored row-major [out, in] as
// in the checkpoint. f32 weights run f32 cuBLAS GEMMs (no TF32: exact f32 products, so the f32
// GPU path tracks the CPU engine); 16-bit weights run cuBLAS with the activations rounded to the
// weight type and f32 accumulation, as a bf16 PyTorch model does, except single rows with bf16
// weights, which use rlt's GEMV (f32 activations, one warp per output row).
#pragma once

#include <cstdint>
#include <memory>

#include "cuda/model_kernels.h"
#include "cuda/runtime.h"

namespace rlt::cuda {

struct CublasLibrary;  // cublas_library.h

// A weight matrix in device memory; owns its bytes unless it is a view of another (tied heads).
struct DeviceMatrix {
  std::shared_ptr<DeviceAllocation> storage;
  ElementType type = ElementType::kBF16;
  int64_t rows = 0, cols = 0;  // outputs, inputs

  const void* data() const { return storage ? storage->data() : nullptr; }
  size_t bytes() const;
};

// A cuBLAS handle bound to one stream, with the scratch that 16-bit GEMM inputs are rounded into.
class LinearRunner {
 public:
  static Result<std::unique_ptr<LinearRunner>> create(StreamHandle stream);
  ~LinearRunner();
  LinearRunner(const LinearRunner&) = delete;
  LinearRunner& operator=(const LinearRunner&) = delete;

  // Sizes the activation scratch for `rows` x `cols` inputs up front (before graph capture).
  Status reserve(int64_t rows, int64_t cols);
  Status run(const DeviceMatrix& w, const float* x, int64_t rows, float* y);

  // Whether run() would round `rows` inputs for `w` into the scratch first (16-bit weights, except
  // single rows with bf16 weights). A producer can then write its output straight into
  // input_scratch() in w.type (rows x w.cols, as convert_from_f32 would) and call run_rounded():
  // the same result as run() on the f32 values, one kernel launch fewer.
  bool rounds_input(const DeviceMatrix& w, int64_t rows) const;
  // Whether run() takes rlt's GEMV (f32 input) rather than a cuBLAS GEMM.
  bool uses_gemv(const DeviceMatrix& w, int64_t rows) const;
  void* input_scratch() const { return scratch_.data(); }
  Status run_rounded(const DeviceMatrix& w, int64_t rows, float* y);
  StreamHandle stream() const { return stream_; }

 private:
  LinearRunner() = default;
  Status gemm(const DeviceMatrix& w, const void* input, int64_t rows, float* y);
  const CublasLibrary* cublas_ = nullptr;
  void* handle_ = nullptr;  // cublasHandle_t
  StreamHandle stream_ = nullptr;
  DeviceAllocation scratch_;
  DeviceAllocation workspace_;  // cuBLAS's, fixed so that GEMMs can be captured in CUDA graphs
};

}  // namespace rlt::cuda
