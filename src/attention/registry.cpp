#include "attention/registry.h"

#include <string>

#ifdef RLT_BUILD_HAS_CUDNN
#include "attention/cudnn_library.h"
#endif

namespace rlt::attention {
namespace {

// Why a CUDA backend is not built, and how that changes: the build switch, and the kernels that
// land with the CUDA runner. Both halves are true in every build, so the message stays actionable.
#ifdef RLT_BUILD_HAS_CUDA
constexpr const char* kCudaBuild = "this build has CUDA, but";
#else
constexpr const char* kCudaBuild =
    "this build has no CUDA (configure with -DRLT_CUDA=ON and the CUDA toolkit), and";
#endif

std::string not_built_message(const char* what) {
  return std::string(kCudaBuild) + " the " + what +
         " kernels are not in this version yet (cuda_paged covers sm_80+ meanwhile)";
}

std::vector<BackendEntry> make_registry() {
  const std::vector<DType> all_float = {DType::kF32, DType::kBF16, DType::kF16};
  const std::vector<DType> half_only = {DType::kBF16, DType::kF16};
  // The CPU backends also read GGML q8_0 blocks (--kv-dtype q8_0), dequantized as they load.
  const std::vector<DType> cpu_kinds = {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8_0};
  std::vector<BackendEntry> r;

  // CUDA backends: declared with their real constraints in every build, so selection and
  // `attention explain --assume-device cuda:sm_NN` are complete even where they are not built.
  BackendEntry hopper{"cuda_hopper",
                      "Hopper paged attention (wgmma + TMA, sm_90a)",
                      {},
                      false,
                      not_built_message("sm_90a"),
                      "",
                      nullptr};
  hopper.caps.device = DeviceKind::kCuda;
  hopper.caps.min_sm = 90;
  hopper.caps.max_sm = 90;
  hopper.caps.kv_dtypes = half_only;
  hopper.caps.head_dim = {64, 256, 64, {64, 128, 256}};
  hopper.caps.page_size = {16, 256, 16, {}};  // TMA moves whole 16-token tiles
  hopper.caps.gqa_ratio = {1, 16, 1, {}};
  hopper.caps.packed_prefill = hopper.caps.cuda_graph_safe = hopper.caps.async_safe = true;
  hopper.caps.deterministic = true;
  r.push_back(hopper);

  // The hint stays meaningful when a test simulates a build without CUDA.
  BackendEntry paged{
      "cuda_paged",
      "paged flash-decoding and packed prefill (sm_80+)",
      {},
      false,
      "it needs a build with CUDA: configure with -DRLT_CUDA=ON and the CUDA toolkit",
      "",
      nullptr};
#ifdef RLT_BUILD_HAS_CUDA
  paged.built = true;
  paged.create = &make_cuda_paged_backend;
#endif
  paged.caps.device = DeviceKind::kCuda;
  paged.caps.min_sm = 80;
  paged.caps.kv_dtypes = all_float;
  paged.caps.head_dim = {8, 256, 8, {}};  // 8 elements per lane, at most one warp per key
  paged.caps.page_size = {1, 256, 1, {}};
  paged.caps.gqa_ratio = {1, 64, 1, {}};
  paged.caps.packed_prefill = paged.caps.cuda_graph_safe = paged.caps.async_safe = true;
  paged.caps.deterministic = true;  // split count depends on the context length only
  r.push_back(paged);

  BackendEntry cudnn{
      "cudnn",
      "cuDNN fused SDPA over paged K/V (sm_80+)",
      {},
      false,
      "it needs a build with CUDA, cudnn.h (cuDNN 9.5+) and the cuDNN frontend headers: run "
      "scripts/setup.sh (it installs the frontend) and configure with -DRLT_CUDA=ON "
      "(-DRLT_CUDNN=ON "
      "to require it)",
      "libcudnn.so.9",
      nullptr};
#ifdef RLT_BUILD_HAS_CUDNN
  cudnn.built = true;
  cudnn.create = &make_cudnn_backend;
  cudnn.library_check = [] { return cudnn_library::probe(cudnn_library::kLibraryName).status(); };
#endif
  cudnn.caps.device = DeviceKind::kCuda;
  cudnn.caps.min_sm = 80;
  cudnn.caps.kv_dtypes = half_only;
  cudnn.caps.head_dim = {8, 128, 8, {}};
  // cuDNN's paged K/V loads take power-of-two pages only (its plans refuse others).
  cudnn.caps.page_size = {1, 256, 1, {1, 2, 4, 8, 16, 32, 64, 128, 256}};
  cudnn.caps.gqa_ratio = {1, 64, 1, {}};
  cudnn.caps.packed_prefill = cudnn.caps.cuda_graph_safe = cudnn.caps.async_safe = true;
  // cuDNN picks its plans per bucketed shape, so a row's result can depend on its batch.
  cudnn.caps.deterministic = false;
  r.push_back(cudnn);

  BackendEntry flash{"cpu_flash",
                     "tiled online-softmax CPU attention (Highway SIMD, OpenMP, split-K)",
                     {},
                     true,
                     "",
                     "",
                     &make_cpu_flash_backend};
  flash.caps.device = DeviceKind::kCpu;
  flash.caps.min_isa = CpuIsa::kSse4;
  flash.caps.kv_dtypes = cpu_kinds;
  flash.caps.head_dim = {2, 512, 2, {}};
  flash.caps.page_size = {1, 1024, 1, {}};
  flash.caps.gqa_ratio = {1, 64, 1, {}};
  flash.caps.packed_prefill = true;
  flash.caps.deterministic = true;
  r.push_back(flash);

  BackendEntry ref{"cpu_reference",
                   "simple scalar CPU attention, the oracle for every other backend",
                   {},
                   true,
                   "",
                   "",
                   &make_cpu_reference_backend};
  ref.caps.device = DeviceKind::kCpu;
  ref.caps.min_isa = CpuIsa::kScalar;
  ref.caps.kv_dtypes = cpu_kinds;
  ref.caps.head_dim = {1, 1024, 1, {}};
  ref.caps.page_size = {1, 4096, 1, {}};
  ref.caps.gqa_ratio = {1, 1024, 1, {}};
  ref.caps.packed_prefill = true;
  ref.caps.deterministic = true;
  r.push_back(ref);
  return r;
}

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> registry = make_registry();
  return registry;
}

const BackendEntry* find_backend(const std::string& name) {
  for (const auto& e : backend_registry())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace rlt::attention
