// report/outputs/process_groups_output.h — the text report's lines for a run of many processes
// (process_groups.h): what was kept in full and why, first; the groups of the others, at the end.
#pragma once

#include <ostream>

#include "report/analyses/process_groups.h"

namespace gpumemtrace::report {

// The line before the processes: how many there were and which are shown in full.
void write_process_groups_note(std::ostream& out, const ProcessGroups& groups, size_t shown);
// The groups, largest first, one line each; then the rest together.
void write_process_groups_text(std::ostream& out, const ProcessGroups& groups);

}  // namespace gpumemtrace::report
