// tests/e2e/inlined/inlined_lib.cpp — libinlined_lib.so, built at -O2 -g -fPIC (tests/module.mk):
// lib_reserve <- lib_workspace are inlined into lib_alloc_workspace, so their frames are named from
// this library's file at an offset of its own (module + offset, not the program's addresses).
#include "tests/e2e/inlined/inlined_lib.h"

#include <cuda_runtime_api.h>

namespace {

size_t g_reserved;

inline void* lib_reserve(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
  g_reserved += bytes;
  return p;
}

inline void* lib_workspace(int megabytes) {
  void* p = lib_reserve(static_cast<size_t>(megabytes) << 20);
  g_reserved += p != nullptr;
  return p;
}

}  // namespace

extern "C" __attribute__((noinline)) void* lib_alloc_workspace(int megabytes) {
  void* p = lib_workspace(megabytes);
  g_reserved += 1;
  return p;
}
