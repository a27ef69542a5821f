// interpose/recorder/unwind.h — native stack capture on the hook's hot path.
#pragma once

#include <cstdint>

namespace gpumemtrace {

// Finds the address range of this library's own code, so captured stacks start at the caller.
// Call once, on the start-up path (it walks the loaded objects).
void init_own_code_range();

// Captures up to `max_depth` return addresses of the calling thread, innermost first, skipping the
// leading frames that belong to this library. Returns the count.
// Hot path: no malloc, no lock of ours, no stdio (libunwind's per-thread cache; see unwind.cpp).
int capture_native_stack(uintptr_t* out, int max_depth);

// True while this thread is inside libunwind for capture_native_stack (interpose/hooks/
// unwinder_pipe.cpp moves the descriptors libunwind opens then out of the program's way).
bool in_unwinder();

}  // namespace gpumemtrace
