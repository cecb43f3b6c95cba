#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rlt {
namespace {
// Logs go to stderr so stdout stays machine-readable (JSON results of the CLI).
spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("rlt");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *instance;
}
}  // namespace

void set_log_level(LogLevel level) {
  static constexpr spdlog::level::level_enum kMap[] = {spdlog::level::debug, spdlog::level::info,
                                                       spdlog::level::warn, spdlog::level::err,
                                                       spdlog::level::off};
  logger().set_level(kMap[static_cast<int>(level)]);
}

bool parse_log_level(std::string_view name, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kNames[] = {
      {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo}, {"warn", LogLevel::kWarn},
      {"error", LogLevel::kError}, {"off", LogLevel::kOff}};
  for (const auto& [n, l] : kNames) {
    if (n == name) {
      *out = l;
      return true;
    }
  }
  return false;
}

void log_debug(std::string_view line) { logger().debug("{}", line); }
void log_info(std::string_view line) { logger().info("{}", line); }
void log_warn(std::string_view line) { logger().warn("{}", line); }
void log_error(std::string_view line) { logger().error("{}", line); }

}  // namespace rlt
