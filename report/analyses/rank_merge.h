// report/analyses/rank_merge.h — `gpumem-report merge`: the cross-rank view of a job from its
// per-process summaries (the JSON reports `gpumemtrace run --report-per-process` writes beside each
// trace), without reading a trace again: how unevenly the ranks peak, which rank ran out of memory
// first, and the sites that leak on every rank (or on many).
//
// A pure function of the summaries (report/cli/merge_inputs.h reads them). Memory: the summaries
// themselves, a few hundred bytes per process plus its leak sites; the merge adds one entry per
// distinct leak site.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// One process, as its JSON report says.
struct RankSummary {
  std::string report;  // the report file it came from
  std::string file;    // its trace
  std::string host;
  int64_t rank = -1;   // -1: the trace records none
  int64_t pid = -1;
  uint64_t peak_bytes = 0;  // its highest device's reserved peak
  int32_t peak_device = -1;
  uint64_t leaked_bytes = 0;
  bool ended_in_oom = false;
  struct Oom {
    int32_t device = -1;
    uint64_t wall_ns = 0;  // wall-clock time (the header's clocks): comparable across hosts
    uint64_t requested = 0;
    std::string site;       // where the failing request was made (one line, innermost first)
    Stack stack;            // the same, frame by frame
    std::string explanation;
  };
  std::vector<Oom> ooms;
  struct Leak {
    std::string site;  // one line, the same for the same code in every process
    Stack stack;       // the same, frame by frame
    uint64_t bytes = 0;
    uint64_t count = 0;
  };
  std::vector<Leak> leaks;  // not suppressed; one per site
};

// A process, as the merged view names it.
struct RankRef {
  size_t index = 0;  // into the summaries
  int64_t rank = -1;
  int64_t pid = -1;
  std::string host;
  uint64_t bytes = 0;
};

struct MergedRanks {
  size_t processes = 0;
  size_t ranks = 0;  // distinct ranks recorded
  size_t hosts = 0;
  // Peaks over the processes (each one's highest device): extremes, median, mean, and the
  // processes highest first (all of them; outputs show the first few).
  RankRef peak_min, peak_max;
  uint64_t peak_median = 0;
  double peak_mean = 0;
  std::vector<RankRef> highest;
  // Every OOM of every process, earliest first (wall-clock time).
  struct OomAt {
    RankRef process;
    RankSummary::Oom oom;
  };
  std::vector<OomAt> ooms;
  size_t processes_with_ooms = 0;
  // Leak sites, on the most processes first, then by bytes.
  struct LeakSite {
    std::string site;
    Stack stack;
    size_t processes = 0;
    uint64_t bytes = 0;  // over those processes
    uint64_t min_bytes = 0, max_bytes = 0;
  };
  std::vector<LeakSite> leaks;
};

MergedRanks merge_ranks(const std::vector<RankSummary>& summaries);

}  // namespace gpumemtrace::report
