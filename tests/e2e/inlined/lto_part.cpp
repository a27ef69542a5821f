// tests/e2e/inlined/lto_part.cpp — small functions another translation unit calls (lto_main.cpp):
// only link-time optimization can inline them there.
#include "tests/e2e/inlined/lto_part.h"

#include <cuda_runtime_api.h>

size_t g_lto_steps;

void* lto_grab(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  return p;
}

void* lto_plan(int megabytes) {
  void* p = lto_grab(static_cast<size_t>(megabytes) << 20);
  g_lto_steps += p != nullptr;
  return p;
}
