// Functions of a library opened at run time with dlopen (cuBLAS, cuDNN: loaded only by the runs
// that use them), resolved by name into typed pointers.
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>

#include <string_view>

#include "rlt/status.h"

namespace rlt {

// Sets `out` to `library`'s function `name`; an error naming it and `library_name` (how the
// message calls the library) when the library lacks it.
template <typename F>
Status resolve_symbol(void* library, const char* name, std::string_view library_name, F& out) {
  out = reinterpret_cast<F>(::dlsym(library, name));
  if (out == nullptr)
    return failed_precondition(fmt::format("{} is missing from {}", name, library_name));
  return {};
}

}  // namespace rlt
