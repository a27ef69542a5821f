// interpose/recorder/unwind.h — native stack capture on the hook's hot path.
#pragma once

#include <cstdint>

namespace gpumemtrace {

// How native stacks are captured (GPUMEMTRACE_UNWIND, docs/configuration.md).
enum class UnwindMode : int {
  Auto,   // frame pointers at every call site checked against DWARF, DWARF (libunwind) elsewhere
  Dwarf,  // DWARF (libunwind's unw_backtrace) for every stack
};

// Finds the address range of this library's own code, so captured stacks start at the caller, and
// sets how stacks are captured. Call once, on the start-up path (it walks the loaded objects); until
// then (or where it is never called: a seccomp filter would kill libunwind's start-up) stacks have no
// native frames.
void init_unwinder(UnwindMode mode);

// Captures up to `max_depth` return addresses of the calling thread, innermost first, skipping the
// leading frames that belong to this library. Returns the count.
// Hot path: no malloc, no lock of ours, no stdio (see unwind.cpp).
int capture_native_stack(uintptr_t* out, int max_depth);

// True while this thread is inside libunwind for capture_native_stack (interpose/hooks/
// unwinder_pipe.cpp refuses the pipe libunwind would open then in the program's table).
bool in_unwinder();

// Forgets every call site's frame-pointer verdict: the code at those addresses may be gone (dlclose,
// interpose/hooks/dlclose.cpp); they are checked again when next seen. Any thread, any time.
void forget_call_sites();

// ---- for tests and benchmarks ----

// Switches the capture mode at run time (init_unwinder sets it once in the recorder).
void set_unwind_mode(UnwindMode mode);

// How the stacks of the calling thread were captured so far.
struct UnwindStats {
  uint32_t frame_pointer = 0;  // by the frame-pointer walk alone (tail cache hits included)
  uint32_t tail_cache = 0;     // ... of which ended with the cached frames beyond a frame without one
  uint32_t learned = 0;        // by a DWARF walk that also checked call sites (the slow path)
  uint32_t dwarf = 0;          // by unw_backtrace (mode dwarf, or the walk could not be trusted)
};
UnwindStats unwind_stats_of_this_thread();

// What is known about the call site at return address `ip`: 1 its function keeps a frame pointer
// there, 2 it does not, 0 not known.
int call_site_verdict(uintptr_t ip);

}  // namespace gpumemtrace
