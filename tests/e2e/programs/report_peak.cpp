// tests/e2e/programs/report_peak.cpp — gpumem-report end-to-end: a planted peak culprit.
//   report_peak [MiB]   plant_peak_culprit() holds MiB (default 64) MiB for a moment, on top of
//                       4 MiB of weights; the peak is MiB + 4 MiB and it is the top culprit.
//                       Everything is freed: no leak.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

constexpr size_t kMiB = 1 << 20;

void* load_weights() {
  void* p = nullptr;
  cudaMalloc(&p, 4 * kMiB);
  return p;
}

void small_steps() {
  for (int i = 0; i < 5; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, kMiB);
    cudaFree(p);
  }
}

void plant_peak_culprit(size_t mib) {
  void* p = nullptr;
  cudaMalloc(&p, mib * kMiB);
  cudaFree(p);
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 64;
  void* weights = load_weights();
  small_steps();
  plant_peak_culprit(mib);
  small_steps();
  cudaFree(weights);
  printf("peak %zu MiB\n", mib + 4);
  return 0;
}
