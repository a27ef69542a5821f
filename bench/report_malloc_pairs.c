/* bench/report_malloc_pairs.c — N malloc/free pairs from a few call sites, the CPU-heap workload
 * whose heaptrack trace heaptrack_print analyzes in the gpumem-report benchmark (same event count
 * as the GPU trace it is compared with). Usage: report_malloc_pairs PAIRS */
#include <stdio.h>
#include <stdlib.h>

static void* __attribute__((noinline)) site_a(size_t n) { return malloc(n); }
static void* __attribute__((noinline)) site_b(size_t n) { return malloc(n); }

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 1000000;
  void* live[64] = {0};
  for (long i = 0; i < pairs; ++i) {
    size_t slot = (size_t)i % 64;
    free(live[slot]);
    live[slot] = (i & 1) ? site_a(64 + (size_t)(i % 4096)) : site_b(128);
  }
  for (int i = 0; i < 64; ++i) free(live[i]);
  puts("done");
  return 0;
}
