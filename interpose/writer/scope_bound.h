// interpose/writer/scope_bound.h — for the scope that ended last, the bytes allocated inside it (by
// any thread, at any layer) and still live when it ended.
//
// Why: under `gpumemtrace ci --fail-on-leak`, the pytest plugin decides each test's leak inside pytest
// (tools/python/gpumemtrace_pytest_results.py), and gpumem-report over the trace so far costs time in
// proportion to the trace: once per test, a suite's cost would grow with the square of its length.
// What gpumem-report calls a scope's leak (report/analyses/scopes.h: blocks and CUDA-level memory
// allocated inside it and live at its end, less caches, library holdings and suppressions) is a part
// of what is counted here, so a test whose bound is within the limit has passed without the analyzer;
// only the others are analysed.
//
// Scopes nest and pair as the analyzer pairs them: an end closes the innermost open scope of the same
// name. Memory: the open scopes' names (at most kMaxOpenScopes; beyond, the oldest are forgotten) and
// the live set the writer keeps (live_set.h), tracked from the first scope_begin on.
// Thread-safety: on_event() from the writer thread only, in sequence order; last_ended() from any
// thread (a mutex: it is called by a language binding, never on a hook's path).
#pragma once

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/recorder/event_record.h"
#include "interpose/writer/live_set.h"

namespace gpumemtrace {

class ScopeBound {
 public:
  static constexpr size_t kMaxOpenScopes = 256;

  // True once a scope has begun: the writer then keeps its live set for every event.
  bool tracking() const { return tracking_; }
  // A scope this bound is kept for: the program's and the pytest plugin's, not NVTX ranges, which
  // nothing asks about and which can come by the thousand per second (each end would walk the whole
  // live set).
  static bool bounds(const EventRecord& r) {
    return (r.op == format::Op::ScopeBegin || r.op == format::Op::ScopeEnd) &&
           !(r.api && std::strcmp(r.api, format::kApiNvtx) == 0);
  }
  // After `r` was applied to `live`.
  void on_event(const EventRecord& r, const LiveSet& live);
  // The bound of the scope that ended last, when its name is `name`; -1 otherwise (no scope ended
  // yet, another scope ended since).
  int64_t last_ended(const char* name) const;

 private:
  struct Open {
    std::string name;
    uint64_t begin_seq = 0;
  };
  bool tracking_ = false;
  std::vector<Open> open_;  // innermost last
  mutable std::mutex mutex_;
  std::string last_name_;   // guarded by mutex_
  int64_t last_bytes_ = -1;  // guarded by mutex_
};

}  // namespace gpumemtrace
