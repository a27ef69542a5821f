// report/analyses/leaks.h — what is still live when the trace ends, each piece in one class:
//  - cached: a caching allocator's segments and chunks (their unused part), an async pool's
//    retained bytes: counted in devices[].cached_bytes, never reported;
//  - held by a library: its allocation stack matches a `held:LIBRARY:PATTERN` rule (the shipped
//    library_rules.supp: cuBLAS/cuDNN handles and workspaces, NCCL communicators, ...);
//  - alive at exit: a PyTorch block the program still referenced when it ended (a model in a
//    global): not a leak of the process, reported for information;
//  - before the recording: held since before the trace's history began (an "initial" event that is
//    not a PyTorch block: a flight recorder's checkpoint, docs/long-runs.md): not a leak of the
//    window the trace covers, reported for information;
//  - leaked: everything else the program allocated and never freed (a `leak:` suppression flags
//    it suppressed). Only this class counts for --fail-on-leak.
#pragma once

#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"
#include "report/analyses/suppressions.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// Fills out.leaks (largest first, suppressed ones flagged), out.held_at_exit and the devices'
// cached, library and alive-at-exit totals (out.devices must be filled first).
void collect_exit_state(const MemoryModel& model, const SymbolTable& symbols, const Suppressions& suppressions,
                        ProcessReport& out);

}  // namespace gpumemtrace::report
