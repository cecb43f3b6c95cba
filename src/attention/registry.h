// Every attention backend rlt knows, with its declared capabilities, whether this build has it,
// and the order `auto` prefers them in per device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attention/backend.h"
#include "attention/capabilities.h"

namespace rlt::attention {

struct BackendEntry {
  std::string name;
  std::string description;
  BackendCapabilities caps;
  bool built = false;      // compiled into this binary
  std::string build_hint;  // how to get it when it is not built
  std::string library;     // a shared library that must load at run time ("" = none)
  std::unique_ptr<AttentionBackend> (*create)() = nullptr;  // null when not built
  // When set, says whether `library` loads and is new enough, and why not (in place of a bare
  // dlopen probe).
  Status (*library_check)() = nullptr;
};

// In `auto` preference order: CUDA backends first (best first), then CPU backends.
const std::vector<BackendEntry>& backend_registry();
const BackendEntry* find_backend(const std::string& name);

}  // namespace rlt::attention
