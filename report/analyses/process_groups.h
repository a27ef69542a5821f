// report/analyses/process_groups.h — a run of many processes (a directory of thousands of traces:
// DataLoader workers started every epoch, a pytest-xdist run, a job's ranks with their helpers) as a
// bounded report: the kMaxProcessesInFull most telling processes are kept in full, every other one is
// summed into its group, by executable, then by rank.
//
// Memory: a full ProcessReport holds its stacks, timelines and tables (about 300 KB for a small trace
// with the HTML timeline); a group holds a few hundred bytes whatever it sums. So a report over N
// processes keeps at most kMaxProcessesInFull full reports (plus those being analysed, one per job)
// and one group per executable and rank: 12,000 traces fit in tens of MB, and the pages and files the
// outputs write grow with the groups, not with N.
//
// Nothing is dropped silently: every figure of the run's summary counts every process (ProcessTotals
// of the full reports plus the groups'), each group names its processes' count, extremes and totals,
// and gates and warnings are judged on every report before it is summed (jobs.h).
//
// Deterministic: which processes stay in full and what each group holds depend only on the reports and
// their input order, never on the order parallel jobs finish in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// Runs of up to this many processes are reported as before: every process in full.
inline constexpr size_t kMaxProcessesInFull = 32;
// Groups listed by name; the rest (a run of thousands of different executables) are summed in one.
inline constexpr size_t kMaxProcessGroupsListed = 64;

// One process's figures as the run's summary adds them up, and their sums (the JSON report's
// "summary", the text report's spread).
struct ProcessTotals {
  uint64_t processes = 0;
  uint64_t events = 0;
  uint64_t allocations = 0;        // every allocation call, pinned host memory's too
  uint64_t frees = 0;
  uint64_t failed_allocations = 0;
  uint64_t block_ooms = 0;
  uint64_t dropped_events = 0;
  uint64_t leaked_bytes = 0;
  uint64_t leaked_count = 0;
  uint64_t cached_bytes = 0;
  uint64_t library_bytes = 0;
  uint64_t alive_at_exit_bytes = 0;
  uint64_t ooms = 0;
  uint64_t failed_calls = 0;
  uint64_t scopes = 0;
  uint64_t leaking_scopes = 0;
  uint64_t not_complete = 0;       // without a footer
  uint64_t cut = 0;
  uint64_t live_when_cut_bytes = 0;
  uint64_t killed_by_signal = 0;
  uint64_t live_when_killed_bytes = 0;
  uint64_t ended_in_oom = 0;       // runs that ended in their OOM (story.h)
  uint64_t live_when_crashed_bytes = 0;
  uint64_t incomplete = 0;         // the recorder dropped events
  uint64_t peak_bytes_sum = 0;     // of each process's peak (for the mean)
  // Extremes over the processes, with the pid and trace of each (the first in input order on a tie).
  struct Extreme {
    uint64_t value = 0;
    int64_t pid = -1;
    std::string file;
    size_t index = SIZE_MAX;  // the process's place in input order; SIZE_MAX: none yet
    // Takes the other's process when it is more extreme (`higher`: larger), or as extreme and earlier.
    void take(const Extreme& other, bool higher);
  };
  Extreme peak_min, peak_max, leaked_min, leaked_max;

  // The process of input `index`. Sums and extremes do not depend on the order of the calls.
  void add(const ProcessReport& r, size_t index);
  void add(const ProcessTotals& other);
};

struct ProcessGroup {
  std::string exe;   // the executable ("" when the header does not say)
  int64_t rank = -1; // -1: no rank recorded
  ProcessTotals totals;
  ProcessTotals::Extreme first;  // its first process in input order (value unused)
};

struct ProcessGroups {
  // Processes summed (not in full); 0 when every process is reported in full.
  uint64_t processes() const { return totals.processes; }
  ProcessTotals totals;                 // of the processes summed
  ProcessTotals all;                    // of every process, those in full too (input order's ties)
  std::vector<ProcessGroup> groups;     // by executable, then rank; the kMaxProcessGroupsListed largest
  ProcessGroup other;                   // the groups beyond those, together (exe "", rank -1)
  uint64_t other_groups = 0;            // how many groups `other` holds
};

// Folds reports into groups as they come, in any order, keeping the `max_full` most telling in full
// (a process with an OOM first, then one that leaked, grew or was cut, then by peak; the first in
// input order on a tie). Thread-safety: none; the caller serialises add().
class ProcessFolder {
 public:
  explicit ProcessFolder(size_t max_full) : max_full_(max_full) {}
  // The report of input `index` (0-based, each index once).
  void add(size_t index, ProcessReport report);
  // The reports kept in full, in input order, and the groups of the others.
  std::pair<std::vector<ProcessReport>, ProcessGroups> finish();

 private:
  struct Kept {
    size_t index;
    ProcessReport report;
  };
  void fold(size_t index, const ProcessReport& report);

  size_t max_full_;
  ProcessTotals all_;       // every report added
  std::vector<Kept> kept_;  // at most max_full_
  std::map<std::pair<std::string, int64_t>, ProcessGroup> groups_;  // by executable, rank
};

}  // namespace gpumemtrace::report
