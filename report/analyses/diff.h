// report/analyses/diff.h — `gpumem-report diff BASE NEW`: how the peak and the leaks changed, by
// call stack. Stacks are matched across the two runs by their frames (function, file, line),
// since stack ids are per file; devices by ordinal.
//
// Processes are paired first, and every section compares the same pairs (pair_processes):
//  - by rank (the header's `rank`: RANK, SLURM_PROCID, ... docs/trace-format.md): a process pairs
//    with the process of the same rank; several of one rank (a rank's own children inherit its
//    variables) pair in start order;
//  - the rest in start order (the header's start_time_ns, then pid: never file names as strings,
//    which put pid 9999 after pid 10000), two processes with different ranks never;
//  - a process left without a partner (unequal counts) is named, and compared with nothing: its
//    peak and leaks are in no section's figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

struct StackDelta {
  Stack stack;
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  uint64_t base_count = 0;
  uint64_t new_count = 0;
  int64_t delta() const { return static_cast<int64_t>(new_bytes) - static_cast<int64_t>(base_bytes); }
};

// One process of a run, as the diff names it.
struct DiffProcess {
  size_t index = 0;        // in its run's reports
  std::string file;
  int64_t pid = -1;
  int64_t rank = -1;       // -1: the trace records none
};

struct ProcessPair {
  DiffProcess base;
  DiffProcess next;
  bool by_rank = false;    // paired by their rank (else by start order)
};

struct PeakDelta {
  size_t process = 0;  // pair index
  int64_t base_pid = -1;
  int64_t new_pid = -1;
  int64_t rank = -1;   // the pair's rank when paired by rank, else -1
  int32_t device = -1;
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  std::vector<StackDelta> culprits;  // largest |delta| first; unchanged stacks left out
  int64_t delta() const { return static_cast<int64_t>(new_bytes) - static_cast<int64_t>(base_bytes); }
};

struct DiffReport {
  std::vector<std::string> base_files;
  std::vector<std::string> new_files;
  std::vector<ProcessPair> pairs;     // in the base run's start order
  std::vector<DiffProcess> only_base; // without a partner in NEW
  std::vector<DiffProcess> only_new;
  std::vector<PeakDelta> peaks;
  std::vector<StackDelta> leaks;  // unsuppressed leaks of the pairs, largest |delta| first; unchanged left out
  uint64_t base_leaked = 0;       // of the paired processes
  uint64_t new_leaked = 0;
  std::vector<std::string> warnings;
};

// The pairs (and the processes left over) of two runs, by the rules above.
void pair_processes(const std::vector<ProcessReport>& base, const std::vector<ProcessReport>& next, DiffReport& out);

DiffReport diff_reports(const std::vector<ProcessReport>& base, const std::vector<ProcessReport>& next);

// "function (file:line) <- ..." : the key stacks are matched by.
std::string stack_signature(const Stack& stack);

// "rank 3" or "pid 4242": how a process is named in diff messages.
std::string process_name(const DiffProcess& p);

}  // namespace gpumemtrace::report
