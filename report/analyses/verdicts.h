// report/analyses/verdicts.h — the two decisions that need a rule a person can check: why an
// allocation failed, and whether a call site is growing. Both are pure functions of numbers the
// analyzer collected, documented in docs/report.md.
#pragma once

#include <cstdint>

#include "report/analyses/ledger.h"
#include "report/analyses/report_model.h"

namespace gpumemtrace::report {

// capacity:      the request exceeds all memory that could be free for it:
//                free inside reserved segments + device free.
// fragmentation: it would fit in that total, but exceeds both the largest free block inside the
//                segments and the device's free memory.
// unknown:       it fits somewhere (a limit, or a driver-side cause the trace cannot see).
// An unknown device free counts as 0 (the verdict then leans to capacity).
Verdict oom_verdict(uint64_t requested, const FragmentationPoint& reserved_state,
                    bool has_device_free, uint64_t device_free);

// A site grows when it set new highs in at least a quarter of the run's windows (and at least 3),
// spread over at least half of the run. One-off allocations (one high), alloc/free of the same
// amount each iteration (a high in the first iteration only) and warm-up loops (highs packed at
// the start) fail this; retaining memory every iteration passes it.
bool is_growing(const Ledger::Site& site, uint32_t windows_used);

}  // namespace gpumemtrace::report
