// bench/alloc_loop.cpp — the workload of the heaptrack side-by-side: N allocate/free pairs issued
// DEPTH frames deep. MODE malloc uses malloc/free (what heaptrack traces), MODE cuda uses
// cudaMalloc/cudaFree of the simulated runtime (what gpumemtrace traces). Prints the loop's own time.
//   alloc_loop MODE N DEPTH
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static bool g_cuda;
static long g_pairs;

__attribute__((noinline)) void run_pairs() {
  if (g_cuda) {
    for (long i = 0; i < g_pairs; ++i) {
      void* p = nullptr;
      cudaMalloc(&p, 256 + (i & 63) * 64);
      cudaFree(p);
    }
  } else {
    for (long i = 0; i < g_pairs; ++i) {
      void* p = malloc(256 + (i & 63) * 64);
      asm volatile("" : : "r"(p) : "memory");  // keep the pair
      free(p);
    }
  }
}

__attribute__((noinline)) void descend(int depth) {
  if (depth <= 1) {
    run_pairs();
  } else {
    descend(depth - 1);
  }
  asm volatile("");  // not a tail call: every level stays a frame
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: alloc_loop malloc|cuda PAIRS DEPTH\n");
    return 2;
  }
  g_cuda = strcmp(argv[1], "cuda") == 0;
  g_pairs = atol(argv[2]);
  const int depth = atoi(argv[3]) - 2;  // main and descend's caller count too
  if (g_cuda) {  // context start-up and first-event costs are not part of the loop
    void* p;
    cudaMalloc(&p, 1);
    cudaFree(p);
  }
  const auto t0 = std::chrono::steady_clock::now();
  descend(depth);
  const auto t1 = std::chrono::steady_clock::now();
  printf("loop_ns=%lld\n", (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  return 0;
}
