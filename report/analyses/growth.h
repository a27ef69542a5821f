// report/analyses/growth.h — call sites whose live bytes keep rising over the run.
//
// Each ledger site records its rises (new highs it kept memory for: its floor rose, ledger.h) and
// the run windows in which they came. A site grows when it rose in at least a quarter of the run's
// windows (and at least 3), spread over at least half of the run, and still in its last quarter;
// and when its level's total (the device's, or pinned host memory's) grew: the least it held in each
// window (its floor, once that window's temporaries are gone) rose by the same rule, by at least half
// of what the site kept (Ledger::floor_grows). A site that only replaces another's memory (a bounded
// cache refilled from a second call site) is not growth. Memory the trace starts with (a snapshot's
// state before its history) is the baseline, never a rise.
// Memory of a step's phase (a PyTorch block whose role is activations, backward temporaries or
// gradients, or optimizer state: roles.h) grows only when its rises also fell in as many passes of
// that phase (passes.h) as the windows rule asks: a loop over identical layers keeps memory at each
// layer as a loop over iterations does, but all inside one forward pass, until the device is full.
// That is the activations of one forward pass (the peak's and the OOM's role advice says what to do),
// not growth. Memory without such a role (no PyTorch roles in the trace) keeps the windows rule alone.
// One-off allocations (one high), alloc/free of the same amount each iteration (a high in the first
// iteration only), a buffer allocated larger each iteration and freed each time (new highs, no
// rise), warm-up loops (rises packed at the start) and bounded caches (filled, then flat) fail
// this; retaining memory every iteration to the end passes it.
//
// The run's clock (GrowthClock) ticks once per run of identical events, not per event: a burst of
// thousands of alike calls (an allocator mapping 20 MiB chunks until the device is full before an
// OOM, a loop that fills a list at start-up) is one moment of the run, so it neither stretches the
// run so that a steady per-iteration rise looks packed at the start, nor counts as growth itself.
#pragma once

#include <cstdint>
#include <vector>

#include "report/analyses/ledger.h"
#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"
#include "report/reader/records.h"

namespace gpumemtrace::report {

class GrowthClock {
 public:
  // The growth window of `e`; *widened when the windows doubled first (GrowthWindows).
  uint32_t tick(const Event& e, bool* widened);
  uint32_t windows_used() const { return windows_.used(ticks_); }

 private:
  GrowthWindows windows_;
  uint64_t ticks_ = 0;
  uint32_t window_ = 0;
  bool started_ = false;
  Op last_op_ = Op::Mark;
  StackId last_stack_;
  int64_t last_result_ = 0;
};

bool is_growing(const Ledger::Site& site, uint32_t windows_used);

// Growing sites of every device, largest rise first.
void collect_growth(const MemoryModel& model, uint32_t windows_used, const SymbolTable& symbols,
                    std::vector<GrowthReport>& out);

}  // namespace gpumemtrace::report
