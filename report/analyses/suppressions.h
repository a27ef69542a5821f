// report/analyses/suppressions.h — LSAN-style suppressions: `leak:PATTERN` lines, matched against
// each frame's function, file and module. A pattern matches as a substring; `*` matches any run
// of characters, a leading `^` / trailing `$` anchor it at the start / end (as LSAN does).
#pragma once

#include <string>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

class Suppressions {
 public:
  // Parses the text of a suppressions file; throws std::runtime_error naming the bad line.
  static Suppressions parse(const std::string& text, const std::string& name);
  static Suppressions load(const std::string& path);

  // The first leak pattern that matches a frame of `stack`, or nullptr.
  const std::string* match_leak(const Stack& stack) const;

 private:
  std::vector<std::string> leak_patterns_;
};

// Exposed for tests.
bool suppression_matches(const std::string& pattern, const std::string& text);

}  // namespace gpumemtrace::report
