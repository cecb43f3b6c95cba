// Logging front for all modules. Keeps spdlog out of widely included headers: callers format
// with fmt and hand over a finished line.
#pragma once

#include <string_view>

namespace rlt {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kOff };

void set_log_level(LogLevel level);
// Parses "debug", "info", "warn", "error", "off"; returns false on anything else.
bool parse_log_level(std::string_view name, LogLevel* out);
void log_debug(std::string_view line);
void log_info(std::string_view line);
void log_warn(std::string_view line);
void log_error(std::string_view line);

}  // namespace rlt
