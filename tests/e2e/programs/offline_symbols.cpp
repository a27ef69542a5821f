// tests/e2e/programs/offline_symbols.cpp — gpumem-report's offline symbolization end to end: two
// leaks, one allocated inside a function inlined into its caller (an inlined frame at the caller's
// address), one from a plain frame. Recorded with GPUMEMTRACE_SYMBOLIZE=0 and =1, the reports must
// name the same functions and lines.
#include <cuda_runtime_api.h>

#include <cstddef>

constexpr size_t kMiB = 1 << 20;

// always_inline: inlined even under the test programs' -O0 -fno-inline, so DWARF records it as a
// DW_TAG_inlined_subroutine of plant_inlined.
static inline __attribute__((always_inline)) void* grab_inlined(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
  return p;
}

void* plant_inlined() { return grab_inlined(5 * kMiB); }

void* plant_plain() {
  void* p = nullptr;
  cudaMalloc(&p, 7 * kMiB);
  return p;
}

int main() {
  plant_inlined();  // both leak
  plant_plain();
  return 0;
}
