// report/outputs/json_output.h — the `--format json` document. Its top-level keys (summary, leaks,
// peaks, ooms, growth, fragmentation; plus processes, spread) are a stable interface for scripts
// and tests, documented in docs/report.md. Stacks are complete here (nothing trimmed).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "report/analyses/diff.h"
#include "report/analyses/process_groups.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// `groups`: the processes of a run of many summed instead of reported in full (process_groups.h):
// counted in "summary" and "spread", listed in "process_groups".
nlohmann::json reports_to_json(const std::vector<ProcessReport>& reports, const ProcessGroups* groups = nullptr);
nlohmann::json diff_to_json(const DiffReport& diff);
nlohmann::json stack_to_json(const Stack& stack);
// The inverse: a report's JSON stack back into its frames (entries that are not objects skipped).
Stack stack_from_json(const nlohmann::json& frames);

}  // namespace gpumemtrace::report
