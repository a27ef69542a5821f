// report/analyses/suppressions.h — LSAN-style suppressions: `leak:PATTERN` lines, matched against
// the function, file and module of the allocation site's frames: those above the program's entry
// (main) that are not the profiler's, the CUDA runtime's or driver's, or the C runtime's (libc,
// libpthread, libdl, ld.so): `leak:libc.so` hides no leak (docs/report.md, "Suppressions").
// A pattern matches as a substring; `*` matches any run of characters, a leading `^` / trailing `$`
// anchor it at the start / end (as LSAN does).
// `held:LIBRARY:PATTERN` lines name memory a library keeps for the life of the process
// (library_rules.supp holds the shipped ones): held at exit, not leaked.
#pragma once

#include <string>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

class Suppressions {
 public:
  // Parses the text of a suppressions file; throws std::runtime_error naming the bad line.
  static Suppressions parse(const std::string& text, const std::string& name);
  // A regular file or a pipe of at most kMaxFileBytes; a pipe nobody writes to for kPipeWaitMs, a
  // device or anything larger is refused with one line (docs/security.md).
  static Suppressions load(const std::string& path);
  static constexpr size_t kMaxFileBytes = size_t{1} << 20;
  static constexpr int kPipeWaitMs = 10000;

  // The rules shipped with gpumem-report (report/analyses/library_rules.supp).
  static Suppressions library_defaults();
  // Adds `other`'s rules after this one's.
  void merge(const Suppressions& other);

  struct LibraryRule {
    std::string library;
    std::string pattern;
  };
  // The first leak pattern that matches an allocation-site frame of `stack`, or nullptr.
  const std::string* match_leak(const Stack& stack) const;
  // The first `held:` rule that matches an allocation-site frame of `stack`, or nullptr.
  const LibraryRule* match_library(const Stack& stack) const;

 private:
  std::vector<std::string> leak_patterns_;
  std::vector<LibraryRule> library_rules_;
};

// True when `pattern` matches the frame's function, file or module.
bool frame_matches(const std::string& pattern, const LogicalFrame& frame);

// Exposed for tests.
bool suppression_matches(const std::string& pattern, const std::string& text);

}  // namespace gpumemtrace::report
