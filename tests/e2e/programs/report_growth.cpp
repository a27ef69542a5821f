// tests/e2e/programs/report_growth.cpp — gpumem-report end-to-end: a planted accumulation.
//   report_growth [ITERATIONS]   (default 50) each iteration: plant_accumulation() keeps 1 MiB (the
//   `epoch_loss += loss` pattern), churn() allocates and frees 1 MiB; one_off() allocates 16 MiB
//   once, before the loop. Everything is freed at the end: no leak, but one growing site.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

constexpr size_t kMiB = 1 << 20;
std::vector<void*> g_history;

void plant_accumulation() {
  void* p = nullptr;
  cudaMalloc(&p, kMiB);
  g_history.push_back(p);
}

void churn() {
  void* p = nullptr;
  cudaMalloc(&p, kMiB);
  cudaFree(p);
}

void* one_off() {
  void* p = nullptr;
  cudaMalloc(&p, 16 * kMiB);
  return p;
}

int main(int argc, char** argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 50;
  void* table = one_off();
  for (int i = 0; i < iterations; ++i) {
    churn();
    plant_accumulation();
  }
  for (void* p : g_history) cudaFree(p);
  cudaFree(table);
  printf("iterations %d\n", iterations);
  return 0;
}
