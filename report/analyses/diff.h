// report/analyses/diff.h — `gpumem-report diff BASE NEW`: how the peak and the leaks changed, by
// call stack. Stacks are matched across the two runs by their frames (function, file, line),
// since stack ids are per file. Processes are paired in order (the sorted files of a directory,
// e.g. rank 0 with rank 0); devices by ordinal.
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

struct PeakDelta {
  size_t process = 0;  // pair index
  int64_t base_pid = -1;
  int64_t new_pid = -1;
  int32_t device = -1;
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  std::vector<StackDelta> culprits;  // largest |delta| first; unchanged stacks left out
  int64_t delta() const { return static_cast<int64_t>(new_bytes) - static_cast<int64_t>(base_bytes); }
};

struct DiffReport {
  std::vector<std::string> base_files;
  std::vector<std::string> new_files;
  std::vector<PeakDelta> peaks;
  std::vector<StackDelta> leaks;  // unsuppressed leaks, largest |delta| first; unchanged left out
  uint64_t base_leaked = 0;
  uint64_t new_leaked = 0;
  std::vector<std::string> warnings;
};

DiffReport diff_reports(const std::vector<ProcessReport>& base, const std::vector<ProcessReport>& next);

// "function (file:line) <- ..." : the key stacks are matched by.
std::string stack_signature(const Stack& stack);

}  // namespace gpumemtrace::report
