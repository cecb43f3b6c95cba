#include "oracle_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace rlt::tok::testing {

std::string source_dir() {
  if (const char* env = std::getenv("RLT_SOURCE_DIR")) return env;
  return RLT_SOURCE_DIR;
}

std::string fixtures_dir() {
  return source_dir() + "/../shared/fixtures";
}

bool path_exists(const std::string& path) {
  return std::filesystem::exists(path);
}

std::optional<std::string> venv_python() {
  const std::string py = source_dir() + "/.venv/bin/python";
  if (!path_exists(py)) return std::nullopt;
  return py;
}

std::string make_workdir(const std::string& name) {
  // The pid keeps concurrent runs (several build trees, ctest -j) apart.
  const std::string dir =
      ::testing::TempDir() + "rlt_tokenizer_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int run_python(const std::string& script, const std::string& args, std::string& output) {
  const auto py = venv_python();
  if (!py) return -1;
  const std::string cmd =
      "'" + *py + "' '" + source_dir() + "/tools/" + script + "' " + args + " 2>&1";
  output.clear();
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::ordered_json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::ordered_json::parse(line));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::string escape(const std::string& s) {
  std::string out;
  const size_t limit = 300;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    }
  }
  if (s.size() > limit) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < 80; ++i) {
    if (i) out += ",";
    out += std::to_string(ids[i]);
  }
  if (ids.size() > 80) out += ",...";
  return out + "]";
}

}  // namespace rlt::tok::testing
