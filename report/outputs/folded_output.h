// report/outputs/folded_output.h — `--format folded`: folded stacks (`frame;frame;...;frame BYTES`,
// root first, one stack per line) for flamegraph.pl, inferno and speedscope.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

enum class FoldedSelection {
  Peak,   // memory live at each device's peak (its culprits; the rest as one "[other stacks]" line):
          // the allocated peak's blocks where the trace has block data, else the reserved peak
  Leaks,  // unsuppressed leaked memory
};

// Lines with the same frames are merged (bytes added). With several processes each line starts
// with a `pid N` frame; with several devices in a process, with a `GPU N` frame.
void write_folded(std::ostream& out, const std::vector<ProcessReport>& reports, FoldedSelection selection);

// One frame as folded text: `function (file:line)`; `;` and line breaks, which the format cannot
// carry, become spaces.
std::string folded_frame(const LogicalFrame& frame);

}  // namespace gpumemtrace::report
