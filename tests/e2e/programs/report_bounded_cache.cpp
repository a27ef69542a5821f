// tests/e2e/programs/report_bounded_cache.cpp — gpumem-report end-to-end: memory that moves between call
// sites while the device's total stays flat, which is no growth.
//   report_bounded_cache [N]   (default 64) a cache of N entries of 1 MiB, filled by load_entry(); then N
//                              iterations, each evicting the oldest entry and storing a new one made by
//                              refresh_entry(), with a temporary from churn(): refresh_entry()'s bytes rise
//                              every iteration, load_entry()'s fall as much. Everything is freed at the end.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <deque>

constexpr size_t kMiB = 1 << 20;

void* load_entry() {
  void* p = nullptr;
  cudaMalloc(&p, kMiB);
  return p;
}

void* refresh_entry() {
  void* p = nullptr;
  cudaMalloc(&p, kMiB);
  return p;
}

void churn() {
  void* p = nullptr;
  cudaMalloc(&p, 2 * kMiB);
  cudaFree(p);
}

int bounded_cache(int n) {
  std::deque<void*> cache;
  for (int i = 0; i < n; ++i) cache.push_back(load_entry());
  for (int i = 0; i < n; ++i) {
    churn();
    cudaFree(cache.front());
    cache.pop_front();
    cache.push_back(refresh_entry());
  }
  for (void* p : cache) cudaFree(p);
  printf("cache %d\n", n);
  return 0;
}

int main(int argc, char** argv) {
  return bounded_cache(argc > 1 ? atoi(argv[1]) : 64);
}
