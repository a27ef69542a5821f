// report/cli/gates.h — the CI gates: each returns the failure messages (empty = passed), worded
// like pytest-memray's: what, how much, and the stack that allocated it.
#pragma once

#include <string>
#include <vector>

#include "report/analyses/diff.h"
#include "report/analyses/report_model.h"
#include "report/cli/options.h"

namespace gpumemtrace::report {

std::vector<std::string> check_gates(const std::vector<ProcessReport>& reports, const Options& options);
// Cut traces (ProcessReport::cut) when a gate was asked for: a gate gives no verdict on them (exit
// status 3) unless --allow-incomplete, which gates them on what they recorded. One message each.
std::vector<std::string> check_incomplete(const std::vector<ProcessReport>& reports, const Options& options);
// diff: --fail-on-peak-increase on the difference; --fail-on-leak and --fail-on-growth judge the new
// run (`new_reports`) exactly as check_gates would judge it alone.
std::vector<std::string> check_diff_gates(const DiffReport& diff, const std::vector<ProcessReport>& new_reports,
                                          const Options& options);

}  // namespace gpumemtrace::report
