// report/outputs/site_line.h — a stack as one line of text, `function (file:line) < caller (...) < ...`,
// innermost first: the same code gives the same line in every process, where stack ids are each
// trace's own. The key that matches a site across ranks in --export's stacks table and in merge.
#pragma once

#include <string>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

std::string site_line(const Stack& stack);

}  // namespace gpumemtrace::report
