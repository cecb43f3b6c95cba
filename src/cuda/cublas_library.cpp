#include "cuda/cublas_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <string>

#include "common/shared_library.h"

namespace rlt::cuda {
namespace {

// cublas_v2.h defines most entry points as macros over versioned symbols (cublasCreate is
// cublasCreate_v2): expanding the macro before quoting gives the name to look up.
#define RLT_QUOTE_EXPANDED(name) RLT_QUOTE(name)
#define RLT_QUOTE(name) #name

Result<CublasLibrary> load() {
  // The name the loader resolves (RUNPATH, LD_LIBRARY_PATH, ld.so.conf), then the toolkit's copy
  // rlt was built against.
  void* library = ::dlopen(RLT_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = ::dlopen(RLT_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return not_found(
        fmt::format("cannot load cuBLAS ({}, nor {}): {}; install the CUDA toolkit's "
                    "cuBLAS or add its folder to LD_LIBRARY_PATH",
                    RLT_CUBLAS_SONAME, RLT_CUBLAS_PATH, why ? why : "not found"));
  }
  const std::string older = fmt::format(
      "{}: a cuBLAS older than the one rlt was built against ({})", RLT_CUBLAS_SONAME,
      RLT_CUBLAS_PATH);
  CublasLibrary api;
  auto bind = [&](const char* symbol, auto& out) { return resolve_symbol(library, symbol, older, out); };
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasCreate), api.create));
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasDestroy), api.destroy));
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasSetStream), api.set_stream));
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasSetWorkspace), api.set_workspace));
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasGemmEx), api.gemm_ex));
  RLT_RETURN_IF_ERROR(bind(RLT_QUOTE_EXPANDED(cublasGetStatusName), api.status_name));
  return api;  // the library stays loaded for the process's life
}

}  // namespace

Result<const CublasLibrary*> cublas_library() {
  static std::once_flag once;
  static Result<CublasLibrary> loaded = not_found("not loaded");
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

}  // namespace rlt::cuda
