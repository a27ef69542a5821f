// tests/e2e/plugin/plugin_alloc.cpp — a library the scenarios program dlopens after the trace has
// started, so that the trace must add its module line and symbolize frames inside it.
#include <cuda_runtime_api.h>

extern "C" __attribute__((noinline)) void plugin_allocate(void) {
  void* p = nullptr;
  cudaMalloc(&p, 8008);
  asm volatile("");
}
