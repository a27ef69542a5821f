// interpose/hooks/runtime_query.h — the CUDA runtime's answers about devices (runtime.cpp), for code
// outside the runtime hooks that records without a CUDA call of its own (the NVTX memory extension).
#pragma once

#include "interpose/recorder/recorder.h"  // DeviceQueries

namespace gpumemtrace::runtime {

// Precondition of every query: it runs inside the caller's HookScope.
extern const DeviceQueries kRuntimeQueries;

}  // namespace gpumemtrace::runtime
