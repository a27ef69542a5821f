#include "report/outputs/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace gpumemtrace::report {

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string format_seconds(uint64_t nanoseconds) {
  char text[32];
  if (nanoseconds < 1000000) {
    std::snprintf(text, sizeof text, "%.1f us", nanoseconds / 1e3);
  } else if (nanoseconds < 1000000000) {
    std::snprintf(text, sizeof text, "%.1f ms", nanoseconds / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.3f s", nanoseconds / 1e9);
  }
  return text;
}

std::optional<uint64_t> parse_size(const std::string& text) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string suffix(end);
  double scale = 1;
  if (suffix.empty() || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else return std::nullopt;
  double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes >= 9e18) return std::nullopt;
  return static_cast<uint64_t>(std::llround(bytes));
}

}  // namespace gpumemtrace::report
