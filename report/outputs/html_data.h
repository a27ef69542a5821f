// report/outputs/html_data.h — what the HTML report carries besides the `--format json` document:
// each stack's view as the text report shows it (the user's code first, libraries folded), and the
// allocation timeline (report/analyses/allocation_timeline.h) in a compact form for the page's
// "every allocation" and segment views (report/outputs/html/timeline_view.js, segment_view.js).
#pragma once

#include <nlohmann/json.hpp>

#include "report/analyses/report_model.h"
#include "report/outputs/stack_view.h"

namespace gpumemtrace::report {

// The `--format json` document made smaller for the page: every "stack" (a list of frames) anywhere
// in it becomes an index into "stack_table", whose entries hold the frames and the view the text
// report shows ("fn (file:line)", "[torch internals: 7 frames]"); fragmentation[].timeline, a copy
// of processes[].devices[].timeline, is left out. The page's script puts the stacks back.
void compact_for_page(nlohmann::json& document, const StackViewOptions& options);

// One process's allocation timeline: times in ns from the process's first event; frames and stacks
// each once (a stack: "f" its frames' indices, "v" its view, frame indices or fold lines); bands as
// columns. docs/report.md ("Every allocation") lists the keys.
nlohmann::json allocation_timeline_json(const ProcessReport& report);

}  // namespace gpumemtrace::report
