// tests/e2e/inlined/lto_main.cpp — inlining across translation units: built with lto_part.cpp at
// -O2 -g -flto (tests/module.mk), lto_grab and lto_plan (defined in lto_part.cpp) are inlined into
// lto_step here, so their DWARF origins lie in another compile unit than the concrete frames.
//   13 MiB: lto_grab <- lto_plan <- lto_step (a real frame) <- main
#include "tests/e2e/inlined/lto_part.h"

__attribute__((noinline)) void* lto_step(int megabytes) {
  void* p = lto_plan(megabytes);
  g_lto_steps += p != nullptr;
  return p;
}

int main(int argc, char**) { return lto_step(12 + argc) ? 0 : 1; }  // 13 MiB: leaks
