#include "common/process_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace rlt {
namespace {

// "Key:   123 kB" lines of a /proc file, in bytes.
std::optional<int64_t> proc_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
        line[key.size()] != ':')
      continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

// The first line of a cgroup file as a number ("max" and unreadable: nullopt).
std::optional<int64_t> cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    return std::stoll(text);
  } catch (...) {
    return std::nullopt;
  }
}

// The process's cgroup v2 folder ("0::/path" in /proc/self/cgroup).
std::optional<std::string> cgroup_dir() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
  return std::nullopt;
}

}  // namespace

ProcessMemory process_memory() {
  ProcessMemory m;
  m.resident = proc_field("/proc/self/status", "VmRSS").value_or(0);
  m.peak_resident = proc_field("/proc/self/status", "VmHWM").value_or(0);
  m.resident_file = proc_field("/proc/self/status", "RssFile").value_or(0);
  m.resident_anon = proc_field("/proc/self/status", "RssAnon").value_or(0);
  return m;
}

std::optional<int64_t> available_memory() {
  std::optional<int64_t> available = proc_field("/proc/meminfo", "MemAvailable");
  if (const auto dir = cgroup_dir()) {
    const auto limit = cgroup_value(*dir + "/memory.max");
    const auto used = cgroup_value(*dir + "/memory.current");
    if (limit && used) {
      const int64_t left = std::max<int64_t>(0, *limit - *used);
      available = available ? std::min(*available, left) : left;
    }
  }
  return available;
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / (1 << 30));
  return fmt::format("{:.1f} MiB", b / (1 << 20));
}

}  // namespace rlt
