// tests/e2e/programs/report_leak.cpp — gpumem-report end-to-end: a planted leak.
//   report_leak [N]   plant_leak() keeps N allocations of 3 MiB (default 1) that are never freed;
//                     everything else (weights, a scratch loop, pinned memory) is freed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr size_t kMiB = 1 << 20;
std::vector<void*> g_leaked;

void plant_leak(int n) {
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 3 * kMiB);
    g_leaked.push_back(p);  // never freed
  }
}

void* load_weights() {
  void* p = nullptr;
  cudaMalloc(&p, 8 * kMiB);
  return p;
}

void scratch_loop() {
  for (int i = 0; i < 10; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 2 * kMiB);
    cudaFree(p);
  }
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  void* weights = load_weights();
  void* pinned = nullptr;
  cudaMallocHost(&pinned, 4096);
  scratch_loop();
  plant_leak(n);
  cudaFreeHost(pinned);
  cudaFree(weights);
  printf("leaked %d\n", n);
  return 0;
}
