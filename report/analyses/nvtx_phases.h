// report/analyses/nvtx_phases.h — NVTX ranges (scope events of api "nvtx") as the phases of their
// threads. An event's phase is the NVTX ranges open on its thread, outermost first, joined by "/"
// ("train/forward"); after a pop it is the enclosing range again, and "" when none is open.
//
// Push/pop ranges belong to the thread that pushed them: an end closes the innermost open range of
// that thread with the same label. Start/end ranges (events with a "range" id) belong to the thread
// that started them until their end, which may come from any thread. Closed ranges are kept (the
// first kMaxNvtxRanges, in the order they closed) for the Perfetto export.
//
// Memory: the open ranges, one phase string per thread, the kept ranges. Single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/report_model.h"
#include "report/reader/records.h"

namespace gpumemtrace::report {

class NvtxPhases {
 public:
  // A scope_begin / scope_end event of api "nvtx".
  void on_scope(const Event& e);
  // True once any NVTX range was seen: until then phases come from marks alone.
  bool seen() const { return seen_; }
  // The phase of an event on thread `tid`; "" when no NVTX range is open there.
  const std::string& phase_of(uint64_t tid) const;
  // Ranges the trace ends inside are kept as not closed, ending at `end_time`.
  void finish(uint64_t end_time, ProcessReport& out);

 private:
  struct OpenRange {
    std::string label;
    uint64_t range = 0;  // 0: push/pop
    uint64_t begin_time = 0;
  };
  struct Thread {
    std::vector<OpenRange> open;  // outermost first
    std::string phase;            // the labels of `open`, joined by "/"
  };
  void close(uint64_t tid, Thread& thread, size_t index, uint64_t end_time, bool closed);

  std::unordered_map<uint64_t, Thread> threads_;
  std::unordered_map<uint64_t, uint64_t> range_threads_;  // open start/end range id -> its thread
  std::vector<NvtxRange> closed_;
  uint64_t total_ = 0;
  bool seen_ = false;
};

}  // namespace gpumemtrace::report
