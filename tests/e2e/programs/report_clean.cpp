// tests/e2e/programs/report_clean.cpp — gpumem-report end-to-end: a clean program. Allocates in a
// training-like loop (weights, per-step activations of varying size, pinned staging, stream-ordered
// scratch) and frees everything: no leak, no growth.
#include <cuda_runtime_api.h>
#include <gpumemtrace.h>

#include <cstdio>

constexpr size_t kMiB = 1 << 20;

void train_step(int step) {
  void* activations = nullptr;
  cudaMalloc(&activations, (4 + step % 3) * kMiB);
  void* scratch = nullptr;
  cudaMallocAsync(&scratch, kMiB, 0);
  cudaFreeAsync(scratch, 0);
  cudaFree(activations);
}

int main() {
  void* weights = nullptr;
  cudaMalloc(&weights, 32 * kMiB);
  void* staging = nullptr;
  cudaMallocHost(&staging, 64 * 1024);
  for (int epoch = 0; epoch < 3; ++epoch) {
    gpumemtrace_mark(epoch == 0 ? "epoch 0" : epoch == 1 ? "epoch 1" : "epoch 2");
    for (int step = 0; step < 20; ++step) train_step(step);
  }
  cudaStreamSynchronize(0);
  cudaFreeHost(staging);
  cudaFree(weights);
  printf("clean\n");
  return 0;
}
