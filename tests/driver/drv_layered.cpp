// tests/driver/drv_layered.cpp — runtime calls that reach the driver (through libdrvminirt.so):
// each allocation must be ONE event, api = the runtime call, driver_api = the driver call under it.
#include <cstdio>

extern "C" {
int cudaMalloc(void** p, size_t size);
int cudaFree(void* p);
int cudaMallocAsync(void** p, size_t size, void* stream);
int cudaFreeAsync(void* p, void* stream);
}

__attribute__((noinline)) void* layered_alloc() {
  void* p = nullptr;
  int r = cudaMalloc(&p, 1234567);
  printf("cudaMalloc rc=%d addr=%p\n", r, p);
  return p;
}

__attribute__((noinline)) void* layered_async() {
  void* p = nullptr;
  int r = cudaMallocAsync(&p, 7654321, nullptr);
  printf("cudaMallocAsync rc=%d addr=%p\n", r, p);
  return p;
}

int main() {
  void* a = layered_alloc();
  void* b = layered_async();
  printf("cudaFreeAsync rc=%d\n", cudaFreeAsync(b, nullptr));
  printf("cudaFree rc=%d\n", cudaFree(a));
  return 0;
}
