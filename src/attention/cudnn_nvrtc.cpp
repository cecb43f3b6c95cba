// The NVRTC functions the cuDNN frontend's headers name (the frontend's own run-time-compiled
// experimental engines; the SDPA graphs the cudnn backend builds never reach them — cuDNN's
// library loads NVRTC by itself for its runtime-compiled engines), forwarding into the toolkit's
// libnvrtc loaded on first use. Linking NVRTC instead would add a ~100 MB library to
// every CUDA build of rlt for code it does not run.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <string>

namespace {

void* nvrtc_symbol(const char* name) {
  static void* const library = [] {
    const std::string soname = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
    return ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  }();
  return library ? ::dlsym(library, name) : nullptr;
}

template <typename F>
F nvrtc_entry(const char* name) {
  return reinterpret_cast<F>(nvrtc_symbol(name));
}

}  // namespace

// Hidden: the forwarders satisfy this binary's own references and are never exported, so they can
// never stand in for the real library's functions, even if this code ends up in a shared object.
#define RLT_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

RLT_HIDDEN nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name,
                                          int num_headers, const char* const* headers,
                                          const char* const* include_names) {
  static const auto f = nvrtc_entry<decltype(&nvrtcCreateProgram)>("nvrtcCreateProgram");
  return f ? f(prog, src, name, num_headers, headers, include_names) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  static const auto f = nvrtc_entry<decltype(&nvrtcDestroyProgram)>("nvrtcDestroyProgram");
  return f ? f(prog) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int num_options,
                                           const char* const* options) {
  static const auto f = nvrtc_entry<decltype(&nvrtcCompileProgram)>("nvrtcCompileProgram");
  return f ? f(prog, num_options, options) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) {
  static const auto f = nvrtc_entry<decltype(&nvrtcGetCUBINSize)>("nvrtcGetCUBINSize");
  return f ? f(prog, size) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) {
  static const auto f = nvrtc_entry<decltype(&nvrtcGetCUBIN)>("nvrtcGetCUBIN");
  return f ? f(prog, cubin) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  static const auto f = nvrtc_entry<decltype(&nvrtcGetProgramLogSize)>("nvrtcGetProgramLogSize");
  return f ? f(prog, size) : NVRTC_ERROR_INTERNAL_ERROR;
}

RLT_HIDDEN nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  static const auto f = nvrtc_entry<decltype(&nvrtcGetProgramLog)>("nvrtcGetProgramLog");
  return f ? f(prog, log) : NVRTC_ERROR_INTERNAL_ERROR;
}

}  // extern "C"
