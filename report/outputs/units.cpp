// report/outputs/units.cpp — byte counts and durations formatted for people.
#include "report/outputs/units.h"

#include <cstdio>
#include <ctime>

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

std::string format_count(double n) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%.0f", n);
  std::string plain = digits, out;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (i && (plain.size() - i) % 3 == 0 && plain[i - 1] != '-') out += ',';
    out += plain[i];
  }
  return out;
}

std::string format_signed_bytes(int64_t delta) {
  const uint64_t magnitude = delta < 0 ? -static_cast<uint64_t>(delta) : static_cast<uint64_t>(delta);
  return (delta < 0 ? "-" : "+") + format_bytes(magnitude);
}

std::string ratio_text(double ratio) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f", ratio);
  return text;
}

std::string padded(std::string text, size_t width) {
  text.append(text.size() < width ? width - text.size() : 1, ' ');
  return text;
}

std::string format_utc(uint64_t ns) {
  const time_t seconds = static_cast<time_t>(ns / 1000000000);
  struct tm tm {};
  char text[32] = "";
  if (gmtime_r(&seconds, &tm)) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string signal_name(int signal) {
  switch (signal) {
    case 1: return "SIGHUP";
    case 2: return "SIGINT";
    case 15: return "SIGTERM";
    default: return "signal " + std::to_string(signal);
  }
}

std::string how_it_ended(format::End end, int exit_status, int signal) {
  const std::string status = exit_status >= 0 ? " with status " + std::to_string(exit_status) : "";
  switch (end) {
    case format::End::Exit: return "exited" + status;
    case format::End::QuickExit: return "ended by _exit" + status;
    case format::End::Signal: return "killed by " + signal_name(signal);
    case format::End::Exec: return "replaced by exec";
    case format::End::Dump:
    case format::End::Unknown: break;
  }
  return "";
}

}  // namespace gpumemtrace::report
