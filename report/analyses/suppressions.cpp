// report/analyses/suppressions.cpp — parsing and matching of suppression files.
#include "report/analyses/suppressions.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

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
    throw std::runtime_error(name + ":" + std::to_string(number) +
                             ": expected `leak:PATTERN` or `held:LIBRARY:PATTERN`, got `" + entry + "`");
  }
  return out;
}

Suppressions Suppressions::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open suppressions file");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

bool frame_matches(const std::string& pattern, const LogicalFrame& frame) {
  return suppression_matches(pattern, frame.function) || suppression_matches(pattern, frame.file) ||
         suppression_matches(pattern, frame.module);
}

const std::string* Suppressions::match_leak(const Stack& stack) const {
  for (const std::string& pattern : leak_patterns_) {
    for (const LogicalFrame& frame : stack) {
      if (frame_matches(pattern, frame)) return &pattern;
    }
  }
  return nullptr;
}

const Suppressions::LibraryRule* Suppressions::match_library(const Stack& stack) const {
  for (const LibraryRule& rule : library_rules_) {
    for (const LogicalFrame& frame : stack) {
      if (frame_matches(rule.pattern, frame)) return &rule;
    }
  }
  return nullptr;
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
