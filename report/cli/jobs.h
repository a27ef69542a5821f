// report/cli/jobs.h — several traces (the ranks or processes of a run) analysed at once: `-j N`.
//
// Each trace is analysed on its own (one ProcessAnalyzer, its own reader and read-ahead thread), so
// traces share nothing but the suppressions (read-only) and the progress line (locked). The result is
// the same as one after another: reports and warnings in input order, and when traces fail, the error
// of the first failing one in input order (traces after it may be left unread).
//
// Memory: up to `jobs` analyses live at once, each bounded as one is (docs/report.md, "Limits"), and
// the reports kept: all of them, or (Folding) at most kMaxProcessesInFull plus the groups' sums.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "report/analyses/process_groups.h"
#include "report/analyses/report_model.h"
#include "report/analyses/suppressions.h"
#include "report/analyses/what_if.h"
#include "report/cli/inputs.h"
#include "report/cli/progress.h"

namespace gpumemtrace::report {

struct AnalyzedInputs {
  std::vector<ProcessReport> reports;  // input order; skipped traces left out, summed ones too
  std::vector<std::string> skipped;    // one warning per skipped (empty) trace, input order
  ProcessGroups groups;                // the processes summed instead of kept (Folding)
};

// A run of many processes (process_groups.h): with more than `max_full` inputs, only the `max_full`
// most telling reports are kept; the others are summed into groups as soon as each is analysed, so
// memory holds at most max_full reports and one per job. `inspect` (may be empty) is given every
// report first, with its input index, one at a time (under a lock, in the order they finish), before it
// is kept or summed: what must judge every process (the gates) does it there.
struct Folding {
  size_t max_full = kMaxProcessesInFull;
  std::function<void(size_t index, ProcessReport& report)> inspect;
};

// The default of -j: the number of CPUs this process may run on (at least 1).
size_t default_jobs();

// Calls job(i) for every i in [0, count), each once, on up to `threads` threads: this one and the
// others it can start (when no more can be started, those started share the work). Returns when
// every call has returned. `job` must not throw; it runs concurrently with itself.
void for_each_on_threads(size_t count, size_t threads, const std::function<void(size_t)>& job);

// Analyses `inputs` on up to `jobs` threads (this one included; 1: one after another here). An empty
// trace among several is skipped with a warning (analyze_one_of_many); a trace given alone, or a
// stream, is analysed as such (analyze_input). `progress` (may be null) shows each file's name with
// one thread, the number of traces with more. Throws the first failing input's error.
// `what_if`: the allocator replays (what_if.h), per trace.
// `folding`: null, every report kept (diff needs them all).
AnalyzedInputs analyze_inputs(const std::vector<TraceInput>& inputs, const Suppressions& suppressions,
                              ProgressLine* progress, size_t jobs, const AnalysisRequest& what_if = AnalysisRequest{},
                              const Folding* folding = nullptr);

}  // namespace gpumemtrace::report
