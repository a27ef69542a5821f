// interpose/recorder/config.cpp — environment parsing (runs once, on the recorder's start-up path,
// never on the hot path).
#include "interpose/recorder/config.h"

#include <sys/auxv.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "interpose/recorder/event_record.h"
#include "util/byte_size.h"
#include "util/edit_distance.h"
#include "util/keep.h"
#include "util/terminal_text.h"

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

// A value as the line shows it: control characters escaped (an ESC sequence in the environment
// must not reach the terminal), as gpumem-report shows names from a trace.
void warn_bad(void (*warn)(const char*), const char* name, const char* value, const char* expected) {
  std::string msg = std::string("ignoring ") + name + "=" + util::printable(value) + " (expected " + expected +
                    "); using the default";
  warn(msg.c_str());
}

// A setting that names one of `choices` (case-insensitive).
template <typename T>
void choice_setting(const char* (*getenv_fn)(const char*), void (*warn)(const char*), const char* name,
                    std::initializer_list<std::pair<const char*, T>> choices, const char* expected, T* field) {
  const char* v = getenv_fn(name);
  if (!v) return;
  for (const auto& [text, value] : choices)
    if (strcasecmp(v, text) == 0) {
      *field = value;
      return;
    }
  warn_bad(warn, name, v, expected);
}

}  // namespace

bool secure_execution() noexcept { return getauxval(AT_SECURE) != 0; }

const char* recorder_getenv(const char* name) noexcept { return secure_execution() ? nullptr : getenv(name); }

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

  bool_setting(var::kDisable, &c.disabled);
  bool_setting(var::kSymbolize, &c.symbolize);
  bool_setting(var::kQuiet, &c.quiet);
  if (const char* v = getenv_fn(var::kVerbose); v && strcasecmp(v, "auto") != 0) {
    bool on = false;
    if (parse_bool(v, &on))
      c.verbose = on ? Verbosity::On : Verbosity::Off;
    else
      warn_bad(warn, var::kVerbose, v, "auto, 0 or 1");
  }
  bool_setting(var::kFreeStacks, &c.free_stacks);
  bool_setting(var::kInternStacks, &c.intern_stacks);
  if (const char* v = getenv_fn(var::kPython); v && strcasecmp(v, "auto") != 0 &&
                                                       !parse_bool(v, &c.python_frames))
    warn_bad(warn, var::kPython, v, "auto, 0 or 1");
  if (const char* v = getenv_fn(var::kOutput)) {
    if (*v) {
      c.output = v;
      c.output_named = c.output.back() != '/' && c.output.find('%') == std::string::npos;
    } else
      warn_bad(warn, var::kOutput, v, "a file path or a directory ending in /");
  }
  int_setting(var::kStackDepth, 0, kMaxNativeFrames, "0..64", &c.stack_depth);
  int_setting(var::kFlushMs, 1, 100, "1..100", &c.flush_ms);
  int_setting(var::kExitTimeoutMs, 0, 600000, "0..600000", &c.exit_timeout_ms);
  if (const char* v = getenv_fn(var::kMaxBytes)) {
    const std::optional<uint64_t> n = util::parse_byte_size(v);
    if (n && (*n == 0 || *n >= kMinTraceCapBytes)) {
      c.max_bytes_default = false;
      c.max_bytes = *n;
    } else
      warn_bad(warn, var::kMaxBytes, v, "0 (no cap) or a size >= 64K, e.g. 512M or 20G");
  }
  if (const char* v = getenv_fn(var::kKeep); v && !util::parse_keep(v, &c.keep_ns, &c.keep_bytes))
    warn_bad(warn, var::kKeep, v, "a duration such as 2h, 30min or 45s, or a size >= 128K such as 20G");
  if (const char* v = getenv_fn(var::kRingEvents)) {
    long n;
    if (parse_int(v, 256, 1 << 22, &n) && (n & (n - 1)) == 0)
      c.ring_events = static_cast<size_t>(n);
    else
      warn_bad(warn, var::kRingEvents, v, "a power of two in 256..4194304");
  }
  // Read elsewhere in the recorder (cupti/backend.cpp, hooks/driver_table.cpp) but checked here too, so
  // that every bad value is reported at start-up, once, in the same words as the others.
  if (const char* v = getenv_fn(var::kBackend);
      v && *v && strcmp(v, "interpose") != 0 && strcmp(v, "cupti") != 0 && strcmp(v, "auto") != 0)
    warn_bad(warn, var::kBackend, v, "interpose, cupti or auto");
  if (const char* v = getenv_fn(var::kDriverStats); v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
    warn_bad(warn, var::kDriverStats, v, "0 or 1");
  choice_setting(getenv_fn, warn, var::kUnwind, {{"auto", UnwindMode::Auto}, {"dwarf", UnwindMode::Dwarf}},
                 "auto or dwarf", &c.unwind);
  choice_setting(getenv_fn, warn, var::kOnFull, {{"wait", OnFull::Wait}, {"drop", OnFull::Drop}},
                 "wait or drop", &c.on_full);
  return c;
}

namespace {

constexpr char kVariablePrefix[] = "GPUMEMTRACE_";
constexpr size_t kMaxSuggestionEdits = 2;

}  // namespace

const char* closest_known_variable(const char* name) {
  const char* const* best = util::nearest_name(name, kKnownVariables, kMaxSuggestionEdits);
  return best ? *best : nullptr;
}

void warn_unknown_variables(const char* const* env, void (*warn)(const char*)) {
  if (secure_execution()) {  // none is read: one line says so, when any is set
    for (; env && *env; ++env)
      if (strncmp(*env, kVariablePrefix, sizeof(kVariablePrefix) - 1) == 0)
        return warn("secure-execution mode (a setuid or setgid program): every GPUMEMTRACE_ variable is ignored");
    return;
  }
  std::vector<std::string> warned;
  for (; env && *env; ++env) {
    const char* entry = *env;
    if (strncmp(entry, kVariablePrefix, sizeof(kVariablePrefix) - 1) != 0) continue;
    const char* equals = strchr(entry, '=');
    const std::string name(entry, equals ? static_cast<size_t>(equals - entry) : strlen(entry));
    const bool known = std::any_of(std::begin(kKnownVariables), std::end(kKnownVariables),
                                   [&](const char* k) { return name == k; });
    if (known || std::find(warned.begin(), warned.end(), name) != warned.end()) continue;
    warned.push_back(name);
    const char* suggestion = closest_known_variable(name.c_str());
    std::string msg = "ignoring " + util::printable(name) + "=" + util::printable(equals ? equals + 1 : "") +
                      " (not a gpumemtrace variable" +
                      (suggestion ? std::string("; did you mean ") + suggestion + "?" : std::string()) + ")";
    warn(msg.c_str());
  }
}

NvtxMode parse_nvtx_mode(const char* value, void (*warn)(const char*)) {
  if (!value || strcasecmp(value, "auto") == 0) return NvtxMode::Auto;
  bool on = false;
  if (parse_bool(value, &on)) return on ? NvtxMode::On : NvtxMode::Off;
  warn_bad(warn, var::kNvtx, value, "auto, 0 or 1");
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
