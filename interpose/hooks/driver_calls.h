// interpose/hooks/driver_calls.h — describe_<symbol>(o, args...) for every hooked row of
// driver_hooks.def: the event each CUDA driver memory call is (call_description.h). Used by the
// driver hooks (driver.cpp) and the CUPTI callbacks (cupti/cupti_events.cpp) alike.
//
// Needs <cuda.h>'s types only: include it (or driver_cuda.h, for its exact symbol names) first; this
// header works with either.
// Thread-safety: pure functions.
#pragma once

#include <cuda.h>

#include "interpose/hooks/call_description.h"

static_assert(CUDA_SUCCESS == gpumemtrace::kCudaSuccess && CUDA_ERROR_OUT_OF_MEMORY == gpumemtrace::kCudaOutOfMemory,
              "record_call() reads driver results as the runtime's");

namespace gpumemtrace::capture {

// cuMemCreate: the device the memory is on, from its properties (not the current context's); host
// memory: none.
inline int32_t location_device(const CUmemAllocationProp* prop) noexcept {
  return prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? prop->location.id : -1;
}

#define GPUMEMTRACE_DRIVER_RESOLVER(...)  // resolving records nothing: no description
#define GPUMEMTRACE_DRIVER_HOOK(symbol, proc, since, stream, need, params, args, meaning)   \
  inline EventFacts describe_##symbol GPUMEMTRACE_OUTCOME_AND params noexcept GPUMEMTRACE_DESCRIBED(#symbol, meaning)
#include "interpose/hooks/driver_hooks.def"
#undef GPUMEMTRACE_DRIVER_HOOK
#undef GPUMEMTRACE_DRIVER_RESOLVER

}  // namespace gpumemtrace::capture
