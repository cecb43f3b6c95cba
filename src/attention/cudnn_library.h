// libcudnn.so.9, loaded when the `cudnn` backend first runs rather than linked: an rlt built with
// cuDNN still starts where the library is missing, and the backend then says why it cannot run.
// The cuDNN frontend (cudnn_backend.cpp) calls cuDNN's C functions by name; cudnn_library.cpp
// defines those names as forwarders into the loaded library.
#pragma once

#include <cstdint>
#include <string>

#include "rlt/status.h"

namespace rlt::attention::cudnn_library {

// The oldest cuDNN the backend runs on: paged K/V in fused attention arrived in 9.5, and
// bottom-right causal masks for every sequence length (not only multiples of 64) in 9.6.
inline constexpr int64_t kMinimumVersion = 90600;
inline constexpr const char* kLibraryName = "libcudnn.so.9";

// Loads libcudnn.so.9 once per process and returns its version as cudnnGetVersion reports it
// (91400 for 9.14.0). Errors name the library, the loader's reason or the version found, and
// what to do about it.
Result<int64_t> load();

// What load() would say for a library of another name, without keeping it loaded (tests, and
// `attention explain` style probes).
Result<int64_t> probe(const std::string& library);

}  // namespace rlt::attention::cudnn_library
