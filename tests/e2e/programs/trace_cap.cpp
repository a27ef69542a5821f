// tests/e2e/programs/trace_cap.cpp — a trace size cap end-to-end: many allocations, then a leak.
//   trace_cap N [clean]   keep_weights() allocates 7 MiB (freed at the end); churn() allocates and frees N
//                 times; after it, plant_leak_after_cap() allocates 5 MiB that is never freed
//                 (not with "clean").
//                 Prints a checksum of what it did and exits 7 (the recorder must change neither).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

constexpr size_t kMiB = 1 << 20;

void* keep_weights() {
  void* p = nullptr;
  cudaMalloc(&p, 7 * kMiB);
  return p;
}

unsigned long churn(int n) {
  unsigned long ok = 0;
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 4096 + static_cast<size_t>(i % 64)) == cudaSuccess) ++ok;
    cudaFree(p);
  }
  return ok;
}

void* plant_leak_after_cap() {
  void* p = nullptr;
  cudaMalloc(&p, 5 * kMiB);
  return p;  // never freed
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 100000;
  void* weights = keep_weights();
  const unsigned long ok = churn(n);
  void* leaked = argc > 2 ? nullptr : plant_leak_after_cap();
  cudaFree(weights);
  printf("churned=%lu leaked=%s\n", ok, leaked ? "yes" : "no");
  return 7;
}
