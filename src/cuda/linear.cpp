#include "cuda/linear.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "cuda/cublas_library.h"
#include "cuda/device.h"
#include "cuda/gemv_bf16.h"

namespace rlt::cuda {
namespace {

Status cublas_status(const CublasLibrary& api, cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return {};
  return internal_error(
      fmt::format("{}: cuBLAS error {} ({})", what, static_cast<int>(s), api.status_name(s)));
}

size_t element_size(ElementType t) {
  return t == ElementType::kF32 ? 4 : 2;
}

cudaDataType_t cuda_type(ElementType t) {
  switch (t) {
    case ElementType::kBF16:
      return CUDA_R_16BF;
    case ElementType::kF16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

}  // namespace

size_t DeviceMatrix::bytes() const {
  return static_cast<size_t>(rows * cols) * element_size(type);
}

Result<std::unique_ptr<LinearRunner>> LinearRunner::create(StreamHandle stream) {
  RLT_ASSIGN_OR_RETURN(const CublasLibrary* api, cublas_library());
  std::unique_ptr<LinearRunner> r(new LinearRunner());
  r->cublas_ = api;
  cublasHandle_t h = nullptr;
  RLT_RETURN_IF_ERROR(cublas_status(*api, api->create(&h), "creating a cuBLAS handle"));
  r->handle_ = h;
  r->stream_ = stream;
  RLT_RETURN_IF_ERROR(cublas_status(*api, api->set_stream(h, stream), "binding cuBLAS to a stream"));
  constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  RLT_ASSIGN_OR_RETURN(r->workspace_,
                       DeviceAllocation::allocate(kWorkspaceBytes, "cuBLAS workspace"));
  RLT_RETURN_IF_ERROR(cublas_status(*api, api->set_workspace(h, r->workspace_.data(), kWorkspaceBytes),
                                    "giving cuBLAS its workspace"));
  return r;
}

LinearRunner::~LinearRunner() {
  if (handle_) cublas_->destroy(static_cast<cublasHandle_t>(handle_));
}

Status LinearRunner::reserve(int64_t rows, int64_t cols) {
  const auto bytes = static_cast<size_t>(rows * cols) * 2;
  if (bytes <= scratch_.bytes()) return {};
  scratch_ = DeviceAllocation();
  RLT_ASSIGN_OR_RETURN(scratch_, DeviceAllocation::allocate(bytes, "GEMM input scratch"));
  return {};
}

bool LinearRunner::uses_gemv(const DeviceMatrix& w, int64_t rows) const {
  return w.type == ElementType::kBF16 && rows == 1;
}

bool LinearRunner::rounds_input(const DeviceMatrix& w, int64_t rows) const {
  return w.type != ElementType::kF32 && !uses_gemv(w, rows);
}

Status LinearRunner::run(const DeviceMatrix& w, const float* x, int64_t rows, float* y) {
  if (rows <= 0) return {};
  if (uses_gemv(w, rows)) {
    return gemv_bf16(static_cast<const uint16_t*>(w.data()), x, y, w.rows, w.cols, stream_);
  }
  if (w.type == ElementType::kF32) return gemm(w, x, rows, y);
  RLT_RETURN_IF_ERROR(reserve(rows, w.cols));
  RLT_RETURN_IF_ERROR(convert_from_f32(x, w.type, scratch_.data(), rows * w.cols, stream_));
  return gemm(w, scratch_.data(), rows, y);
}

Status LinearRunner::run_rounded(const DeviceMatrix& w, int64_t rows, float* y) {
  if (rows <= 0) return {};
  if (!rounds_input(w, rows) || scratch_.bytes() < static_cast<size_t>(rows * w.cols) * 2) {
    return internal_error("run_rounded: the producer did not fill the GEMM input scratch");
  }
  return gemm(w, scratch_.data(), rows, y);
}

Status LinearRunner::gemm(const DeviceMatrix& w, const void* input, int64_t rows, float* y) {
  auto* h = static_cast<cublasHandle_t>(handle_);
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: Y(out × rows) = W(in × out)ᵀ · X(in × rows).
  const cudaDataType_t t = cuda_type(w.type);
  // f32 weights: pedantic f32 (never TF32, whatever NVIDIA_TF32_OVERRIDE says); 16-bit weights:
  // tensor cores with f32 accumulation.
  const cublasComputeType_t compute =
      w.type == ElementType::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  return cublas_status(
      *cublas_,
      cublas_->gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(rows),
                   static_cast<int>(w.cols), &one, w.data(), t, static_cast<int>(w.cols), input, t,
                   static_cast<int>(w.cols), &zero, y, CUDA_R_32F, static_cast<int>(w.rows),
                   compute, CUBLAS_GEMM_DEFAULT),
      "linear layer GEMM");
}

}  // namespace rlt::cuda
