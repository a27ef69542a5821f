// report/outputs/site_line.cpp — a stack as one line (site_line.h).
#include "report/outputs/site_line.h"

namespace gpumemtrace::report {

std::string site_line(const Stack& stack) {
  std::string site;
  for (const LogicalFrame& f : stack) {
    if (!site.empty()) site += " < ";
    site += f.function.empty() ? (f.module.empty() ? std::string("?") : f.module) : f.function;
    if (!f.file.empty()) site += " (" + f.file + (f.line ? ":" + std::to_string(f.line) : std::string()) + ")";
  }
  return site;
}

}  // namespace gpumemtrace::report
