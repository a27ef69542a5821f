// tests/unit/support/nofp_frames.cpp — libgmt_nofp_frames.so, built with -fomit-frame-pointer, for
// recorder_unwind_test.cpp: frames the frame-pointer walk must not trust.
#include <cstdint>

extern "C" {

// Calls fn(arg) with rbp as its caller left it (a function that never touches rbp: the rbp chain
// skips this frame).
__attribute__((noinline, visibility("default"))) void gmt_nofp_call(void (*fn)(void*), void* arg) {
  fn(arg);
  asm volatile("");  // not a tail call
}

// Calls fn(arg) with rbp holding an ordinary value, as code without frame pointers may leave it:
// here an aligned address that is not mapped.
__attribute__((noinline, visibility("default"))) void gmt_nofp_call_scrambled(void (*fn)(void*), void* arg) {
#if defined(__x86_64__)
  asm volatile("movabs $0x00007ff0deadbee0, %%rbp" ::: "rbp");
#endif
  fn(arg);
  asm volatile("");
}

}  // extern "C"
