// report/analyses/held_until_gc.h — what a scope left live that a garbage collection freed later:
// cyclic garbage, held until the collector ran, not the scope's leak (docs/report.md, "Held until
// garbage collection").
//
// The pytest plugin leaves garbage collection as the test suite has it (no gc.collect() between
// tests), so memory that only a reference cycle holds is still live when its test ends, and is freed
// whenever the collector runs next: during a later test, or in the one collect the plugin makes at the
// session's end. The plugin reports each collection that freed objects as a "gc" record: a window
// [t, end_time] on the collecting thread (docs/trace-format.md). A holding that a closed scope counted
// as its leak (note_leak) and whose release lies inside such a window was held until garbage
// collection:
//  - a release the recorder saw live (cudaFree, cuMemFree, a block freed through the C API): its time
//    comes from the clock the window's times come from (CLOCK_MONOTONIC), on the thread that ran the
//    finalizer, which is the collecting thread; so it must lie inside the window, on its thread;
//  - a release PyTorch reported (its allocation history, "delayed" events): its time is PyTorch's
//    time_us, whole microseconds rounded down, converted to the trace's clock at each drain with a
//    freshly fitted converter (docs/pytorch.md: an entry's time moves by microseconds between two
//    conversions), and its thread is the drain's; so it may lie kTorchSlackNs either side of a
//    window, on any thread. Why that is safe: the error it covers is microseconds, far inside it;
//    the only block it can misfile is one the test really kept and the program's own code freed
//    within 100 us of a collection that freed objects, and that block is still listed, sized and
//    with its stack, under "held until garbage collection" rather than as a leak. A wall-clock step
//    between a free and its drain (PyTorch's times are wall-clock) moves it by the step: it is then
//    outside every window and stays a leak, the conservative side.
// Collections never overlap (CPython runs one at a time, under the GIL or stopping the world), so
// the windows sorted by start are sorted by end too.
//
// Decided at the end (finish), once every window and release is known: a window's record is written
// after the frees inside it, and PyTorch's frees reach the trace later still, at its next drain.
//
// Memory: one entry per leak a closed scope counted while it is live (the model holds the holding
// itself), and one per such leak released since; together at most kMaxCandidates, under 64 MiB (past
// it, further leaks are not checked against collections: they stay leaks, with one warning). The
// windows: at most kMaxWindows, 24 MiB (past it, the newest are dropped, with one warning: their
// frees stay leaks).
// Single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analyses/memory_model.h"
#include "report/analyses/node_pool.h"
#include "report/reader/records.h"

namespace gpumemtrace::report {

class HeldUntilGc {
 public:
  static constexpr uint64_t kTorchSlackNs = 100'000;  // 100 us
  static constexpr size_t kMaxCandidates = size_t{1} << 20;
  static constexpr size_t kMaxWindows = size_t{1} << 20;

  explicit HeldUntilGc(size_t max_candidates = kMaxCandidates, size_t max_windows = kMaxWindows)
      : max_candidates_(max_candidates), max_windows_(max_windows) {}

  // The event the model is about to apply: a release it causes happens then, on its thread.
  void at(const Event& e) {
    now_ = e.t;
    tid_ = e.tid;
    delayed_ = e.delayed;
    timed_ = true;
  }
  // A release outside any event (the end of the history at a trace's size cap): in no window.
  void at_no_event() { timed_ = false; }
  void on_window(const Event& gc);
  // The scope report `report` counts holding h as its leak (h live when the scope ended).
  void note_leak(const Holding& h, uint32_t report);
  void on_release(const Holding& h);
  // Calls held(report, site, size) for each noted leak that a collection freed; adds a warning per
  // limit reached.
  void finish(const std::function<void(uint32_t report, SiteId site, uint64_t size)>& held,
              std::vector<std::string>& warnings);

 private:
  struct Candidate {
    uint32_t report = 0;
    SiteId site = 0;
    uint64_t size = 0;
  };
  struct Released {
    Candidate leak;
    uint64_t t = 0;
    uint64_t tid = 0;
    bool delayed = false;
    bool timed = false;  // released by an event (at t, on tid)
  };
  struct Window {
    uint64_t begin = 0;
    uint64_t end = 0;
    uint64_t tid = 0;
  };
  bool in_a_window(const Released& r) const;

  size_t max_candidates_;
  size_t max_windows_;
  uint64_t now_ = 0;
  uint64_t tid_ = 0;
  bool delayed_ = false;
  bool timed_ = false;
  NodePool nodes_;  // before the map it serves
  std::pmr::unordered_multimap<uint64_t, Candidate> live_{&nodes_};  // by holding_id
  std::vector<Released> released_;
  std::vector<Window> windows_;  // in the order of their records (their ends)
  uint64_t unchecked_leaks_ = 0;    // past kMaxCandidates
  uint64_t dropped_windows_ = 0;    // past kMaxWindows
};

}  // namespace gpumemtrace::report
