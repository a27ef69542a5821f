// tests/e2e/programs/oom_endings.cpp — a process that dies right after an out-of-memory error, the
// way CUDA programs do (CUDA_CHECK(cudaMalloc(...)) -> abort()). For tests/e2e/test_oom_endings.py.
//   oom_endings N ENDING   N allocations of 1000+i bytes, then cudaMalloc of 1 TiB (out of memory on
//                          the simulated 16 GiB device), then ENDING:
//                            abort    abort() (CUDA_CHECK's usual end)
//                            kill     kill(getpid(), SIGKILL)
//                            killpg   killpg(getpgrp(), SIGKILL): the whole process group
//                            external prints "oom" on stdout and waits to be killed from outside
//                            _exit    _exit(1)
//                            segv     a null pointer written to in the error path
//   oom_endings first      one allocation of 4096 bytes, prints "ready", waits to be killed
#include <cuda_runtime_api.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void wait_forever() {
  for (;;) pause();
}

__attribute__((noinline)) void end_after_oom(const char* ending) {
  fprintf(stderr, "CUDA error: out of memory\n");
  if (!strcmp(ending, "abort")) abort();
  if (!strcmp(ending, "kill")) kill(getpid(), SIGKILL);
  if (!strcmp(ending, "killpg")) killpg(getpgrp(), SIGKILL);
  if (!strcmp(ending, "external")) {
    printf("oom\n");
    fflush(stdout);
    wait_forever();
  }
  if (!strcmp(ending, "_exit")) _exit(1);
  if (!strcmp(ending, "segv")) *static_cast<volatile int*>(nullptr) = 1;
  exit(3);
}

__attribute__((noinline)) cudaError_t allocate_too_much() {
  void* p = nullptr;
  return cudaMalloc(&p, size_t{1} << 40);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "first")) {
    void* p = nullptr;
    cudaMalloc(&p, 4096);
    printf("ready\n");
    fflush(stdout);
    wait_forever();
  }
  if (argc != 3) {
    fprintf(stderr, "usage: oom_endings N abort|kill|killpg|external|_exit|segv | oom_endings first\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  for (int i = 0; i < n; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 1000 + i);
  }
  if (allocate_too_much() != cudaSuccess) end_after_oom(argv[2]);
  return 0;
}
