// report/outputs/html_output.h — `--format html`: one self-contained HTML file (no network request)
// with timelines, flame graphs and tables, rendered in the browser from the `--format json`
// document embedded in it (docs/report.md, "HTML report").
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "report/analyses/process_groups.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// `groups`: the processes of a run of many not drawn in full (process_groups.h): one table.
void write_html(std::ostream& out, const std::vector<ProcessReport>& reports, const ProcessGroups* groups = nullptr);

// JSON text made safe inside a <script> element: `<` becomes \u003c (so no `</script>` or `<!--`
// can appear), U+2028 and U+2029 become escapes. Still valid JSON with the same value.
std::string script_safe_json(const std::string& json_text);

}  // namespace gpumemtrace::report
