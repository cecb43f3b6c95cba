#include "attention/cudnn_library.h"

#include <cudnn.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include "common/shared_library.h"

namespace rlt::attention::cudnn_library {
namespace {

// Every cuDNN entry point the frontend and the backend call, resolved together.
struct Entries {
  decltype(&::cudnnGetVersion) get_version = nullptr;
  decltype(&::cudnnGetErrorString) get_error_string = nullptr;
  decltype(&::cudnnGetLastErrorString) get_last_error_string = nullptr;
  decltype(&::cudnnCreate) create = nullptr;
  decltype(&::cudnnDestroy) destroy = nullptr;
  decltype(&::cudnnSetStream) set_stream = nullptr;
  decltype(&::cudnnGetStream) get_stream = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&::cudnnBackendFinalize) finalize = nullptr;
  decltype(&::cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&::cudnnBackendExecute) execute = nullptr;
};

// Written once, inside load()'s thread-safe static initialization, before it returns success.
Entries entries;

template <typename F>
Status resolve(void* library, const char* name, F& out) {
  return resolve_symbol(library, name, "the loaded cuDNN library", out);
}

Result<int64_t> open_library(const std::string& name, bool keep) {
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return failed_precondition(fmt::format(
        "the cudnn attention backend needs {} (cuDNN 9), which does not load ({}); install cuDNN "
        "9.6 or newer "
        "where the dynamic loader finds it (ldconfig or LD_LIBRARY_PATH), or pick another backend "
        "(--attention-backend auto)",
        name, why ? why : "no reason given"));
  }
  Entries e;
  const auto all = [&]() -> Status {
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnGetVersion", e.get_version));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnGetErrorString", e.get_error_string));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnGetLastErrorString", e.get_last_error_string));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnCreate", e.create));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnDestroy", e.destroy));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnSetStream", e.set_stream));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnGetStream", e.get_stream));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnBackendCreateDescriptor", e.create_descriptor));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnBackendDestroyDescriptor", e.destroy_descriptor));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnBackendFinalize", e.finalize));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnBackendSetAttribute", e.set_attribute));
    RLT_RETURN_IF_ERROR(resolve(library, "cudnnBackendGetAttribute", e.get_attribute));
    return resolve(library, "cudnnBackendExecute", e.execute);
  };
  Status s = all();
  const auto version = s.ok() ? static_cast<int64_t>(e.get_version()) : 0;
  if (s.ok() && version < kMinimumVersion) {
    s =
        failed_precondition(fmt::format("{} is cuDNN {}.{}.{}; the cudnn attention backend needs "
                                        "{}.{} or newer (paged K/V with bottom-right "
                                        "causal masks of any length); upgrade cuDNN or pick "
                                        "another backend (--attention-backend auto)",
                                        name, version / 10000, version / 100 % 100, version % 100,
                                        kMinimumVersion / 10000, kMinimumVersion / 100 % 100));
  }
  if (!s.ok() || !keep) {
    ::dlclose(library);
    if (!s.ok()) return s;
    return version;
  }
  entries = e;  // the library stays loaded for the life of the process
  return version;
}

}  // namespace

Result<int64_t> load() {
  static const Result<int64_t> loaded = open_library(kLibraryName, /*keep=*/true);
  return loaded;
}

Result<int64_t> probe(const std::string& library) {
  return open_library(library, /*keep=*/false);
}

}  // namespace rlt::attention::cudnn_library

// The cuDNN functions the frontend calls, forwarding into the library load() opened. The backend
// calls load() before it touches the frontend, so these only ever run with the entries set; if
// they were reached first they fail like an uninitialized cuDNN would instead of crashing.
using rlt::attention::cudnn_library::entries;

// Hidden: the forwarders satisfy this binary's own references and are never exported, so they can
// never stand in for the real library's functions, even if this code ends up in a shared object.
#define RLT_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

RLT_HIDDEN size_t cudnnGetVersion(void) {
  return entries.get_version ? entries.get_version() : 0;
}

RLT_HIDDEN const char* cudnnGetErrorString(cudnnStatus_t status) {
  return entries.get_error_string ? entries.get_error_string(status) : "cuDNN is not loaded";
}

RLT_HIDDEN void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (entries.get_last_error_string) {
    entries.get_last_error_string(message, max_size);
  } else if (max_size > 0) {
    message[0] = '\0';
  }
}

RLT_HIDDEN cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  return entries.create ? entries.create(handle) : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  return entries.destroy ? entries.destroy(handle) : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  return entries.set_stream ? entries.set_stream(handle, stream) : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t* stream) {
  return entries.get_stream ? entries.get_stream(handle, stream) : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                                      cudnnBackendDescriptor_t* descriptor) {
  return entries.create_descriptor ? entries.create_descriptor(type, descriptor)
                                   : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  return entries.destroy_descriptor ? entries.destroy_descriptor(descriptor)
                                    : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  return entries.finalize ? entries.finalize(descriptor) : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                  cudnnBackendAttributeName_t name,
                                                  cudnnBackendAttributeType_t type, int64_t count,
                                                  const void* values) {
  return entries.set_attribute ? entries.set_attribute(descriptor, name, type, count, values)
                               : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                  cudnnBackendAttributeName_t name,
                                                  cudnnBackendAttributeType_t type,
                                                  int64_t requested, int64_t* count, void* values) {
  return entries.get_attribute
             ? entries.get_attribute(descriptor, name, type, requested, count, values)
             : CUDNN_STATUS_NOT_INITIALIZED;
}

RLT_HIDDEN cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan,
                                             cudnnBackendDescriptor_t variant_pack) {
  return entries.execute ? entries.execute(handle, plan, variant_pack)
                         : CUDNN_STATUS_NOT_INITIALIZED;
}

}  // extern "C"
