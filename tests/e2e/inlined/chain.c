/* tests/e2e/inlined/chain.c — the call chain of issue 19 in C, built at -O1, -O2 and -O3 with -g
 * (tests/module.mk): every level but train_step and main is inlined, so one return address stands
 * for several functions. tests/e2e/test_inlined_frames.py checks that the recorder and gpumem-report
 * name each level with its own call line, as eu-addr2line -i does.
 *   3 MiB: alloc_scratch <- build_batch <- train_step (a real frame) <- main
 *   5 MiB: stage_reserve <- stage_tensor <- prepare_step <- main, everything inlined into main
 * Each allocation's result is used after the call, so that no call is a tail call (which would take
 * its caller off the stack). */
#include <cuda_runtime_api.h>
#include <stddef.h>

#define MiB ((size_t)1 << 20)

static size_t g_batches, g_steps, g_staged;

static inline void* alloc_scratch(size_t bytes) {
  void* p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return NULL;
  return p;
}

static inline void* build_batch(int batch) {
  void* scratch = alloc_scratch((size_t)batch * MiB);
  g_batches += scratch != NULL;
  return scratch;
}

__attribute__((noinline)) void* train_step(int batch) {
  void* p = build_batch(batch);
  g_steps += p != NULL;
  return p;
}

/* Not alloc_scratch's body again: GCC would fold the two into one function (-fipa-icf). */
static inline void* stage_reserve(size_t bytes) {
  void* p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) p = NULL;
  g_staged += bytes;
  return p;
}

static inline void* stage_tensor(size_t bytes) {
  void* p = stage_reserve(bytes);
  g_staged += p != NULL;
  return p;
}

static inline void* prepare_step(int n) {
  void* p = stage_tensor((size_t)n * MiB);
  g_staged += 2;
  return p;
}

int main(int argc, char** argv) {
  (void)argv;
  void* a = train_step(2 + argc);    /* 3 MiB: leaks */
  void* b = prepare_step(4 + argc);  /* 5 MiB: leaks */
  return (a && b && g_batches + g_steps + g_staged > 0) ? 0 : 1;
}
