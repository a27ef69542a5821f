// report/outputs/text_output.h — the default report: short, for a terminal or a CI log. Stacks
// are printed by report/outputs/stack_view.h: the user's code first, library internals folded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "report/analyses/diff.h"
#include "report/analyses/process_groups.h"
#include "report/analyses/report_model.h"
#include "report/outputs/stack_view.h"

namespace gpumemtrace::report {

struct TextOptions {
  StackViewOptions stacks;  // how each stack is shown
  size_t max_items = 5;   // leak groups, culprits, growth sites per section
  bool top_sites = false; // --top-sites: the "top sites" section (top_sites_output.h)
  const ProcessGroups* groups = nullptr;  // a run of many processes: those not shown in full
};

void write_text(std::ostream& out, const std::vector<ProcessReport>& reports, const TextOptions& options);
void write_diff_text(std::ostream& out, const DiffReport& diff, const TextOptions& options);
// The stack as indented lines (for the report and for gate messages), as stack_lines() shows it.
void write_stack(std::ostream& out, const Stack& stack, const std::string& indent, const StackViewOptions& options);
// How a diff names a pair of processes: "rank 3" (paired by rank) or "pid 100 -> 200".
std::string pair_name(const ProcessPair& pair);

}  // namespace gpumemtrace::report
