// A per-test copy of the demo checkpoint (small, GQA, four loops, bf16).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "model/demo_checkpoint.h"
#include "model/ouro_weights.h"

namespace rlt::model::testing {

// Written once per test process and removed when it exits.
class DemoDir {
 public:
  DemoDir() : path_(std::filesystem::temp_directory_path() / ("rlt_model_test_" + std::to_string(::getpid()))) {
    Status s = write_demo_checkpoint(path_.string());
    if (!s.ok()) throw std::runtime_error(s.to_string());
  }
  ~DemoDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline std::string demo_dir() {
  static const DemoDir dir;
  return dir.path();
}

inline std::shared_ptr<const OuroModel> demo_model() {
  static auto model = [] {
    auto m = load_ouro_model(demo_dir());
    if (!m.ok()) throw std::runtime_error(m.status().to_string());
    return *m;
  }();
  return model;
}

}  // namespace rlt::model::testing
