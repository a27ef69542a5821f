// tests/e2e/plugin/fake_cublas.cpp — a stand-in for a CUDA library that keeps state for the life of
// the process: cublasCreate_v2 allocates the handle's workspace with cudaMalloc and never frees it
// (as the real cuBLAS does until cublasDestroy, which frameworks call at exit or never).
#include <cuda_runtime_api.h>

#include <cstddef>

namespace {
void* g_workspace = nullptr;
}

extern "C" __attribute__((visibility("default"), noinline)) int cublasCreate_v2(void** handle) {
  if (!g_workspace && cudaMalloc(&g_workspace, 8u << 20) != cudaSuccess) return 1;
  *handle = g_workspace;
  return 0;
}
