// interpose/recorder/config.cpp — environment parsing (runs once, on the recorder's start-up path,
// never on the hot path).
#include "interpose/recorder/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "interpose/recorder/event_record.h"
#include "util/byte_size.h"

namespace gpumemtrace {
namespace {

// Parses a decimal integer in [lo, hi]; false on anything else.
bool parse_int(const char* text, long lo, long hi, long* out) {
  if (!text || !*text) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_bool(const char* text, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (strcasecmp(text, t) == 0) return *out = true, true;
  for (const char* f : kFalse)
    if (strcasecmp(text, f) == 0) return *out = false, true;
  return false;
}

void warn_bad(void (*warn)(const char*), const char* name, const char* value, const char* expected) {
  std::string msg = std::string("ignoring ") + name + "=" + value + " (expected " + expected +
                    "); using the default";
  warn(msg.c_str());
}

}  // namespace

uint64_t default_trace_cap(uint64_t free_bytes, bool known) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  if (!known) return 8 * kGiB;
  const uint64_t tenth = free_bytes / 10;
  return tenth < kGiB ? kGiB : tenth > 64 * kGiB ? 64 * kGiB : tenth;
}

Config parse_config(const char* (*getenv_fn)(const char*), void (*warn)(const char*)) {
  Config c;
  auto bool_setting = [&](const char* name, bool* field) {
    const char* v = getenv_fn(name);
    if (v && !parse_bool(v, field)) warn_bad(warn, name, v, "0 or 1");
  };
  auto int_setting = [&](const char* name, long lo, long hi, const char* expected, auto* field) {
    const char* v = getenv_fn(name);
    long parsed;
    if (!v) return;
    if (parse_int(v, lo, hi, &parsed))
      *field = static_cast<std::remove_pointer_t<decltype(field)>>(parsed);
    else
      warn_bad(warn, name, v, expected);
  };

  bool_setting("GPUMEMTRACE_DISABLE", &c.disabled);
  bool_setting("GPUMEMTRACE_SYMBOLIZE", &c.symbolize);
  bool_setting("GPUMEMTRACE_QUIET", &c.quiet);
  bool_setting("GPUMEMTRACE_FREE_STACKS", &c.free_stacks);
  if (const char* v = getenv_fn("GPUMEMTRACE_PYTHON"); v && strcasecmp(v, "auto") != 0 &&
                                                       !parse_bool(v, &c.python_frames))
    warn_bad(warn, "GPUMEMTRACE_PYTHON", v, "auto, 0 or 1");
  if (const char* v = getenv_fn("GPUMEMTRACE_OUTPUT")) {
    if (*v) {
      c.output = v;
      c.output_named = c.output.back() != '/' && c.output.find('%') == std::string::npos;
    } else
      warn_bad(warn, "GPUMEMTRACE_OUTPUT", v, "a file path or a directory ending in /");
  }
  int_setting("GPUMEMTRACE_STACK_DEPTH", 0, kMaxNativeFrames, "0..64", &c.stack_depth);
  int_setting("GPUMEMTRACE_FLUSH_MS", 1, 100, "1..100", &c.flush_ms);
  int_setting("GPUMEMTRACE_EXIT_TIMEOUT_MS", 0, 600000, "0..600000", &c.exit_timeout_ms);
  if (const char* v = getenv_fn("GPUMEMTRACE_MAX_BYTES")) {
    const std::optional<uint64_t> n = util::parse_byte_size(v);
    if (n && (*n == 0 || *n >= kMinTraceCapBytes)) {
      c.max_bytes_default = false;
      c.max_bytes = *n;
    } else
      warn_bad(warn, "GPUMEMTRACE_MAX_BYTES", v, "0 (no cap) or a size >= 64K, e.g. 512M or 20G");
  }
  if (const char* v = getenv_fn("GPUMEMTRACE_RING_EVENTS")) {
    long n;
    if (parse_int(v, 256, 1 << 22, &n) && (n & (n - 1)) == 0)
      c.ring_events = static_cast<size_t>(n);
    else
      warn_bad(warn, "GPUMEMTRACE_RING_EVENTS", v, "a power of two in 256..4194304");
  }
  // Read elsewhere in the recorder (cupti/backend.cpp, hooks/driver_table.cpp) but checked here too, so
  // that every bad value is reported at start-up, once, in the same words as the others.
  if (const char* v = getenv_fn("GPUMEMTRACE_BACKEND");
      v && *v && strcmp(v, "interpose") != 0 && strcmp(v, "cupti") != 0 && strcmp(v, "auto") != 0)
    warn_bad(warn, "GPUMEMTRACE_BACKEND", v, "interpose, cupti or auto");
  if (const char* v = getenv_fn("GPUMEMTRACE_DRIVER_STATS"); v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
    warn_bad(warn, "GPUMEMTRACE_DRIVER_STATS", v, "0 or 1");
  if (const char* v = getenv_fn("GPUMEMTRACE_ON_FULL")) {
    if (strcasecmp(v, "wait") == 0)
      c.on_full = OnFull::Wait;
    else if (strcasecmp(v, "drop") == 0)
      c.on_full = OnFull::Drop;
    else
      warn_bad(warn, "GPUMEMTRACE_ON_FULL", v, "wait or drop");
  }
  return c;
}

NvtxMode parse_nvtx_mode(const char* value, void (*warn)(const char*)) {
  if (!value || strcasecmp(value, "auto") == 0) return NvtxMode::Auto;
  bool on = false;
  if (parse_bool(value, &on)) return on ? NvtxMode::On : NvtxMode::Off;
  warn_bad(warn, "GPUMEMTRACE_NVTX", value, "auto, 0 or 1");
  return NvtxMode::Auto;
}

std::string expand_output_path(const std::string& tmpl, long pid, const std::string& exe_name) {
  std::string t = tmpl;
  if (!t.empty() && t.back() == '/') t += kDefaultTraceName;
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '%' || i + 1 == t.size()) {
      out += t[i];
      continue;
    }
    char c = t[++i];
    if (c == 'p')
      out += std::to_string(pid);
    else if (c == 'e')
      out += exe_name;
    else if (c == '%')
      out += '%';
    else {
      out += '%';
      out += c;
    }
  }
  return out;
}

}  // namespace gpumemtrace
