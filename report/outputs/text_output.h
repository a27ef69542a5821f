// report/outputs/text_output.h — the default report: short, for a terminal or a CI log. Frames
// print as `function (file:line)`, with the profiler's own and CUDA's internal frames trimmed.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "report/analyses/diff.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

struct TextOptions {
  size_t max_frames = 12;  // per stack, after trimming
  size_t max_items = 5;   // leak groups, culprits, growth sites per section
};

void write_text(std::ostream& out, const std::vector<ProcessReport>& reports, const TextOptions& options);
void write_diff_text(std::ostream& out, const DiffReport& diff, const TextOptions& options);
// The stack as indented lines, trimmed (for the report and for gate messages): the profiler's and
// CUDA's frames, the C runtime's below main(), and, when the stack has Python frames, the native
// frames of the interpreter and of ctypes/libffi. At most max_frames, then "... N more frames".
void write_stack(std::ostream& out, const Stack& stack, const std::string& indent, size_t max_frames);
// True for frames of libgpumemtrace and of the CUDA libraries (libcudart, libcuda, libcupti).
bool is_internal_frame(const LogicalFrame& frame);

}  // namespace gpumemtrace::report
