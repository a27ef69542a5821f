// interpose/hooks/driver_query.h — driver facts for code outside the hooks (the CUPTI backend), without
// the hook table (which needs driver_cuda.h, incompatible with a plain <cuda.h> in the same file).
//
// Thread-safety: any thread. The queries take no lock after their driver function is found (first use).
// They call the driver: callers that must keep errno wrap them in KeepErrno (recorder.h).
#pragma once

#include <cstdint>

#include "interpose/recorder/recorder.h"  // DeviceQueries

struct CUctx_st;  // CUcontext, without <cuda.h>

namespace gpumemtrace::driver {

// Device of the calling thread's current context, -1 when unknown.
int32_t current_device() noexcept;

// Device of context `ctx` (cuCtxGetDevice_v2, CUDA 13); older drivers: the current context's device.
int32_t device_of(CUctx_st* ctx) noexcept;

// The driver's answers for record_call(): the driver hooks and the CUPTI callbacks record through
// these (device of the current context or of a given one, cuMemGetInfo_v2, cuDeviceGetName,
// cuDeviceTotalMem_v2).
extern const DeviceQueries kDriverQueries;

// True when `p` points into this library (so it must never become a slot's target: that would loop).
bool is_own_code(const void* p) noexcept;

}  // namespace gpumemtrace::driver
