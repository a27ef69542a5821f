// tests/unit/support/fp_frames.cpp — libgmt_fp_frames.so, built with frame pointers, for
// recorder_unwind_test.cpp: frames the frame-pointer walk can trust, and a call site that plants
// whatever rbp a test asks for.
#include <cstdint>

extern "C" {

// Calls fn(arg) `frames` frames below this call (each a real frame: no inlining, no tail call).
__attribute__((noinline, visibility("default"))) void gmt_fp_descend(int frames, void (*fn)(void*), void* arg) {
  if (frames <= 1)
    fn(arg);
  else
    gmt_fp_descend(frames - 1, fn, arg);
  asm volatile("");  // not a tail call
}

#if defined(__x86_64__)
// Calls fn(arg) with rbp = rbp_value, or with a proper frame pointer when rbp_value is 0. Its call
// information (CFI) does not use rbp, so DWARF unwinds through it whatever rbp holds.
void gmt_call_with_rbp(uintptr_t rbp_value, void (*fn)(void*), void* arg);
asm(R"(
  .text
  .globl gmt_call_with_rbp
  .type gmt_call_with_rbp, @function
gmt_call_with_rbp:
  .cfi_startproc
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  test %rdi, %rdi
  cmovnz %rdi, %rbp
  mov %rsi, %rax
  mov %rdx, %rdi
  call *%rax
  pop %rbp
  .cfi_def_cfa_offset 8
  ret
  .cfi_endproc
  .size gmt_call_with_rbp, .-gmt_call_with_rbp
)");
#endif

}  // extern "C"
