// tests/e2e/programs/nvtx_phases.c — a C program that names its phases with NVTX v3 alone (the CUDA
// toolkit's header-only NVTX, no gpumemtrace header), for tests/e2e/test_nvtx_e2e.py.
//
//   push "load"                       1 MiB, kept
//   push "train"                      2 MiB, kept
//     push "forward"                  8 MiB: the peak (11 MiB live), then freed
//     pop
//   pop
//   start "prefetch" (main thread)    ended by a second thread, which allocates 3 MiB inside it
//   domain "io": push registered "read" 512 KiB, freed; pop
//   mark "done", then everything is freed
// It prints the values NVTX returned ("levels: ...") and exits 1 when a CUDA call fails.
// `nvtx_phases deep`: 40 nested ranges "d0".."d39" around one allocation, deeper than the recorder
// keeps; prints the level of the innermost push and of each pop, innermost first.
// `nvtx_phases bogus`: NVTX calls a careless program makes: a registered-string handle and a domain
// handle that NVTX never handed out, and a message that runs into an unmapped page; then one
// allocation, and "survived".
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MIB (1024u * 1024u)

static nvtxRangeId_t g_prefetch;
static int g_failed;

static void* allocate(size_t bytes) {
  void* p = NULL;
  if (cudaMalloc(&p, bytes) != cudaSuccess) g_failed = 1;
  return p;
}

static void* g_prefetched;

static void* end_prefetch(void* unused) {
  (void)unused;
  g_prefetched = allocate(3 * MIB);
  nvtxRangeEnd(g_prefetch);
  return NULL;
}

static int deep(void) {
  char name[8];
  int innermost = -1;
  for (int i = 0; i < 40; ++i) {
    snprintf(name, sizeof(name), "d%d", i);
    innermost = nvtxRangePushA(name);
  }
  cudaFree(allocate(4096));
  printf("innermost: %d\npops:", innermost);
  for (int i = 0; i < 40; ++i) printf(" %d", nvtxRangePop());
  printf("\nextra pop: %d\n", nvtxRangePop());
  return g_failed;
}

static int bogus(void) {
  nvtxEventAttributes_t mark;
  memset(&mark, 0, sizeof(mark));
  mark.version = NVTX_VERSION;
  mark.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  mark.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  mark.message.registered = (nvtxStringHandle_t)(uintptr_t)0x10;  /* never handed out */
  nvtxDomainHandle_t io = nvtxDomainCreateA("io");
  nvtxDomainMarkEx(io, &mark);
  nvtxDomainMarkEx((nvtxDomainHandle_t)(uintptr_t)0x20, &mark);  /* nor this domain */
  const long page = sysconf(_SC_PAGESIZE);
  char* two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (two == MAP_FAILED) return 1;
  munmap(two + page, page);
  memset(two + page - 6, 'x', 6);  /* "xxxxxx" with no NUL before the unmapped page */
  nvtxRangePushA(two + page - 6);
  cudaFree(allocate(4096));
  nvtxRangePop();
  printf("survived\n");
  return g_failed;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "deep") == 0) return deep();
  if (argc > 1 && strcmp(argv[1], "bogus") == 0) return bogus();
  int levels[8];
  int n = 0;
  levels[n++] = nvtxRangePushA("load");
  void* weights = allocate(1 * MIB);
  levels[n++] = nvtxRangePop();

  levels[n++] = nvtxRangePushA("train");
  void* gradients = allocate(2 * MIB);
  levels[n++] = nvtxRangePushA("forward");
  void* activations = allocate(8 * MIB);
  cudaFree(activations);
  levels[n++] = nvtxRangePop();
  levels[n++] = nvtxRangePop();

  g_prefetch = nvtxRangeStartA("prefetch");
  pthread_t thread;
  if (pthread_create(&thread, NULL, end_prefetch, NULL) != 0 || pthread_join(thread, NULL) != 0) return 1;

  nvtxDomainHandle_t io = nvtxDomainCreateA("io");
  nvtxEventAttributes_t read;
  memset(&read, 0, sizeof(read));
  read.version = NVTX_VERSION;
  read.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  read.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  read.message.registered = nvtxDomainRegisterStringA(io, "read");
  levels[n++] = nvtxDomainRangePushEx(io, &read);
  cudaFree(allocate(MIB / 2));
  levels[n++] = nvtxDomainRangePop(io);
  nvtxMarkA("done");
  cudaFree(weights);
  cudaFree(gradients);
  cudaFree(g_prefetched);

  printf("levels:");
  for (int i = 0; i < n; ++i) printf(" %d", levels[i]);
  printf("\nprefetch id: %llu\n", (unsigned long long)g_prefetch);
  return g_failed;
}
