// bench/alloc_loop.cpp — the workload of the heaptrack side-by-side: N allocate/free pairs issued
// DEPTH frames deep. MODE malloc uses malloc/free (what heaptrack traces), MODE cuda uses
// cudaMalloc/cudaFree of the simulated runtime (what gpumemtrace traces). Prints the loop's own time:
// wall clock (loop_ns) and this thread's CPU time (loop_cpu_ns, which leaves out the time the thread
// waited for a core on a loaded machine).
//   alloc_loop MODE N DEPTH
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

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
  timespec cpu0, cpu1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
  const auto t0 = std::chrono::steady_clock::now();
  descend(depth);
  const auto t1 = std::chrono::steady_clock::now();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu1);
  const long long cpu_ns = (cpu1.tv_sec - cpu0.tv_sec) * 1000000000LL + (cpu1.tv_nsec - cpu0.tv_nsec);
  printf("loop_ns=%lld loop_cpu_ns=%lld\n",
         (long long)std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), cpu_ns);
  return 0;
}
