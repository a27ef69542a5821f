// report/analyses/suppressions.cpp — parsing and matching of suppression files.
#include "report/analyses/suppressions.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "report/outputs/stack_view.h"

namespace gpumemtrace::report {
namespace {

// Glob match of `pattern` (only `*` is special) against all of `text`. Iterative with one
// backtrack point, so it is linear-ish and cannot blow the stack on hostile patterns.
bool glob(const char* p, const char* pend, const char* t, const char* tend) {
  const char* star = nullptr;
  const char* retry = nullptr;
  while (t < tend) {
    if (p < pend && *p == '*') {
      star = p++;
      retry = t;
    } else if (p < pend && *p == *t) {
      ++p;
      ++t;
    } else if (star) {
      p = star + 1;
      t = ++retry;
    } else {
      return false;
    }
  }
  while (p < pend && *p == '*') ++p;
  return p == pend;
}

// The C runtime's own modules (libc, libpthread, libdl, the dynamic loader): glue that allocations pass
// through on the way to the CUDA runtime (pthread_once, dlopen), never where the program allocated.
bool is_c_runtime_frame(const LogicalFrame& frame) {
  const size_t slash = frame.module.rfind('/');
  const std::string module = slash == std::string::npos ? frame.module : frame.module.substr(slash + 1);
  for (const char* prefix : {"libc.so", "libc-", "libpthread", "libdl.so", "libdl-", "ld-linux", "ld-"}) {
    if (module.compare(0, std::char_traits<char>::length(prefix), prefix) == 0) return true;
  }
  return false;
}

// The first of `rules` (in order) that matches a site frame of `stack`: a frame above the program's
// entry (main included; _start, __libc_start_main, start_thread below it are not) that is neither the
// profiler's nor the CUDA runtime's or driver's (is_internal_frame) nor the C runtime's. These are the
// frames that say where the program allocated, the ones the text report shows for the stack.
template <typename Rule, typename PatternOf>
const Rule* first_site_match(const std::vector<Rule>& rules, const Stack& stack, PatternOf pattern_of) {
  const size_t site_end = frames_above_entry(stack);
  for (const Rule& rule : rules) {
    for (size_t i = 0; i < site_end; ++i) {
      const LogicalFrame& frame = stack[i];
      if (is_internal_frame(frame) || is_c_runtime_frame(frame)) continue;
      if (frame_matches(pattern_of(rule), frame)) return &rule;
    }
  }
  return nullptr;
}

}  // namespace

bool suppression_matches(const std::string& pattern, const std::string& text) {
  if (pattern.empty() || text.empty()) return false;
  std::string glob_pattern = pattern;
  bool anchored_start = glob_pattern.front() == '^';
  if (anchored_start) glob_pattern.erase(0, 1);
  bool anchored_end = !glob_pattern.empty() && glob_pattern.back() == '$';
  if (anchored_end) glob_pattern.pop_back();
  if (!anchored_start) glob_pattern.insert(0, "*");
  if (!anchored_end) glob_pattern.push_back('*');
  const char* p = glob_pattern.data();
  return glob(p, p + glob_pattern.size(), text.data(), text.data() + text.size());
}

Suppressions Suppressions::parse(const std::string& text, const std::string& name) {
  Suppressions out;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    size_t end = line.find_last_not_of(" \t\r");
    std::string entry = line.substr(start, end - start + 1);
    const std::string leak = "leak:", held = "held:";
    if (entry.compare(0, leak.size(), leak) == 0 && entry.size() > leak.size()) {
      out.leak_patterns_.push_back(entry.substr(leak.size()));
      continue;
    }
    const size_t colon = entry.find(':', held.size());
    if (entry.compare(0, held.size(), held) == 0 && colon != std::string::npos && colon > held.size() &&
        colon + 1 < entry.size()) {
      out.library_rules_.push_back(
          LibraryRule{entry.substr(held.size(), colon - held.size()), entry.substr(colon + 1)});
      continue;
    }
    // The line as given, cut: a 50 MB line is not echoed whole.
    const std::string shown = entry.size() > 80 ? entry.substr(0, 80) + "..." : entry;
    throw std::runtime_error(name + ":" + std::to_string(number) +
                             ": expected `leak:PATTERN` or `held:LIBRARY:PATTERN`, got `" + shown + "`");
  }
  return out;
}

Suppressions Suppressions::load(const std::string& path) {
  // A regular file, or a pipe (--suppressions <(...)), of at most kMaxFileBytes: not /dev/zero (it
  // never ends), not a FIFO nobody writes to (opening it would wait forever).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw std::runtime_error(path + ": cannot open suppressions file: " + std::strerror(errno));
  std::string text;
  auto fail = [&](const std::string& why) {
    ::close(fd);
    throw std::runtime_error(path + ": " + why);
  };
  struct stat st;
  if (::fstat(fd, &st) != 0) fail("cannot read suppressions file");
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) fail("not a suppressions file (not a regular file or a pipe)");
  if (S_ISFIFO(st.st_mode)) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, kPipeWaitMs) == 0) fail("nothing written to the pipe in " + std::to_string(kPipeWaitMs / 1000) + " s");
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(std::string("cannot read suppressions file: ") + std::strerror(errno));
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) fail("larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB: not a suppressions file");
  }
  ::close(fd);
  return parse(text, path);
}

bool frame_matches(const std::string& pattern, const LogicalFrame& frame) {
  return suppression_matches(pattern, frame.function) || suppression_matches(pattern, frame.file) ||
         suppression_matches(pattern, frame.module);
}

const std::string* Suppressions::match_leak(const Stack& stack) const {
  return first_site_match(leak_patterns_, stack, [](const std::string& pattern) -> const std::string& { return pattern; });
}

const Suppressions::LibraryRule* Suppressions::match_library(const Stack& stack) const {
  return first_site_match(library_rules_, stack, [](const LibraryRule& rule) -> const std::string& { return rule.pattern; });
}

void Suppressions::merge(const Suppressions& other) {
  leak_patterns_.insert(leak_patterns_.end(), other.leak_patterns_.begin(), other.leak_patterns_.end());
  library_rules_.insert(library_rules_.end(), other.library_rules_.begin(), other.library_rules_.end());
}

Suppressions Suppressions::library_defaults() {
  static const char kRules[] =
#include "report/analyses/library_rules.inc"
      ;
  return parse(kRules, "library_rules.supp");
}

}  // namespace gpumemtrace::report
