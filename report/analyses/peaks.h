// report/analyses/peaks.h — per device: the summary, the peaks at both levels with their culprits
// and role split, and the fragmentation timeline, from the model at the end of the trace.
#pragma once

#include "report/analyses/memory_model.h"
#include "report/analyses/report_model.h"
#include "report/analyses/roles.h"
#include "report/reader/symbols.h"

namespace gpumemtrace::report {

// Fills out.devices, out.peaks, out.fragmentation and out.pinned_host.
void collect_peaks(MemoryModel& model, const Roles& roles, const SymbolTable& symbols, ProcessReport& out);

}  // namespace gpumemtrace::report
