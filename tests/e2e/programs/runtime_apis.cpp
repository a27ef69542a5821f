// tests/e2e/programs/runtime_apis.cpp — calls every hooked runtime API from distinctive functions
// with distinctive sizes, so tests can check each event's API, size and stack.
// Usage: runtime_apis [MODE]   MODE: all (default) | oom | errno
#include <cuda_runtime_api.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpumemtrace.h"

static void* g_keep[16];

void allocate_weights() { cudaMalloc(&g_keep[0], 3 * 1024 * 1024 + 123); }
void free_weights() { cudaFree(g_keep[0]); }
void allocate_pinned() { cudaMallocHost(&g_keep[1], 4096 + 1); }
void allocate_host_alloc() { cudaHostAlloc(&g_keep[2], 4096 + 2, 0); }
void free_pinned() {
  cudaFreeHost(g_keep[1]);
  cudaFreeHost(g_keep[2]);
}
void allocate_managed() { cudaMallocManaged(&g_keep[3], 8192 + 3, cudaMemAttachGlobal); }
void allocate_pitch() {
  size_t pitch = 0;
  cudaMallocPitch(&g_keep[4], &pitch, 1000, 10);
}
void allocate_3d() {
  cudaPitchedPtr p;
  cudaExtent extent = {100, 4, 2};
  cudaMalloc3D(&p, extent);
  g_keep[5] = p.ptr;
}
void allocate_array() {
  cudaChannelFormatDesc desc = {32, 0, 0, 0, cudaChannelFormatKindFloat};
  cudaArray_t a;
  cudaMallocArray(&a, &desc, 64, 8, 0);
  cudaFreeArray(a);
}
void allocate_async() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaMallocAsync(&g_keep[6], 65536 + 6, s);
  cudaFreeAsync(g_keep[6], s);
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaMallocFromPoolAsync(&g_keep[7], 65536 + 7, pool, s);
  cudaFreeAsync(g_keep[7], s);
  cudaMemPoolTrimTo(pool, 0);
}
void leak_on_purpose() { cudaMalloc(&g_keep[8], 5 * 1024 * 1024 + 8); }
int allocate_too_much() {
  void* p = nullptr;
  return cudaMalloc(&p, (size_t)1 << 50);  // 1 PiB: always out of memory
}
void ask_meminfo() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
}
void report_blocks() {
  gpumemtrace_mark("phase one");
  char* seg = static_cast<char*>(g_keep[4]);
  gpumemtrace_block_alloc(seg + 512, 1000, seg, 0, "my_pool");
  gpumemtrace_block_free(seg + 512, 1000, seg, 0, "my_pool");
  gpumemtrace_block_oom(12345, 0, "my_pool");
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "all";
  if (mode == "oom") {
    // Transparency: the error code, the sticky error and errno are what the runtime gives.
    errno = 1234;
    int rc = allocate_too_much();
    int saved = errno;
    int last = cudaGetLastError();
    printf("rc=%d last=%d errno=%d\n", rc, last, saved);
    return 0;
  }
  allocate_weights();
  allocate_pinned();
  allocate_host_alloc();
  allocate_managed();
  allocate_pitch();
  allocate_3d();
  allocate_array();
  allocate_async();
  ask_meminfo();
  report_blocks();
  free_pinned();
  free_weights();
  leak_on_purpose();
  int rc = allocate_too_much();
  printf("done rc=%d\n", rc);
  return 0;
}
