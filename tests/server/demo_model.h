// The embedded demo checkpoint written once per test process into a temporary folder.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "model/demo_checkpoint.h"
#include "server/model_context.h"

namespace rlt::server::testing {

inline const std::string& demo_dir() {
  static const std::string dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("rlt_server_test_" + std::to_string(::getpid()));
    if (!model::write_demo_checkpoint(d.string()).ok()) throw std::runtime_error("cannot write the demo checkpoint");
    return d.string();
  }();
  return dir;
}

// The demo model as the server loads it (tokenizer, chat template, limits), loaded once.
inline const ModelContext& demo_context() {
  static const ModelContext m = [] {
    auto r = ModelContext::load(demo_dir(), "");
    if (!r.ok()) throw std::runtime_error(r.status().to_string());
    return std::move(*r);
  }();
  return m;
}

}  // namespace rlt::server::testing
