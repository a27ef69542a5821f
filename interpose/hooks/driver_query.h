// interpose/hooks/driver_query.h — driver facts for code outside the hooks (the CUPTI backend), without
// the hook table (which needs driver_cuda.h, incompatible with a plain <cuda.h> in the same file).
#pragma once

#include <cstdint>

namespace gpumemtrace::driver {

// Device of the calling thread's current context, -1 when unknown. No lock after the first call.
int32_t current_device() noexcept;

// True when `p` points into this library.
bool is_own_code(const void* p) noexcept;

}  // namespace gpumemtrace::driver
