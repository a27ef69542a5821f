// report/cli/merge_inputs.h — what `gpumem-report merge REPORT...` reads: gpumem-report's own JSON
// reports (`--format json`, one per process as `gpumemtrace run --report-per-process` writes them, or
// one of several processes), turned into one RankSummary per process (rank_merge.h).
#pragma once

#include <string>
#include <vector>

#include "report/analyses/rank_merge.h"

namespace gpumemtrace::report {

struct MergeInputs {
  std::vector<RankSummary> processes;  // in the order of the files, then of each report's processes
  std::vector<std::string> warnings;   // one line each
};

// The reports `args` name: files, and directories (their *.report.json files, sorted by name).
// Throws std::runtime_error with one line naming the file for a path that cannot be read, a file
// that is not JSON, or JSON that is not a gpumem-report report (a diff's, a trace's).
MergeInputs read_merge_inputs(const std::vector<std::string>& args);

}  // namespace gpumemtrace::report
