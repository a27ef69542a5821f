// tests/e2e/programs/scopes.cpp — named scopes through include/gpumemtrace.h, for the recorder's
// end-to-end tests (tests/e2e/test_scopes_e2e.py).
//   scopes nested        "outer" { 1111 bytes, "inner" { 2222 bytes }, "inner" again { 3333 bytes } }
//   scopes threads N     N threads, each: "worker" { "thread-<i>" { 4096+i bytes } }; prints
//                        "tid <i> <gettid>" per thread
//   scopes long          a 250-byte name, a 1024-byte name ending in a 2-byte UTF-8 character
//                        (straddles the 1023-byte limit), each around a 5555-byte allocation
// Every allocation is freed inside its scope.
#include <cuda_runtime_api.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpumemtrace.h"

void allocate_and_free(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
  cudaFree(p);
}

void open_inner_scope(size_t bytes) {
  gpumemtrace_scope_begin("inner");
  allocate_and_free(bytes);
  gpumemtrace_scope_end("inner");
}

int run_nested() {
  gpumemtrace_scope_begin("outer");
  allocate_and_free(1111);
  open_inner_scope(2222);
  open_inner_scope(3333);
  gpumemtrace_scope_end("outer");
  return 0;
}

void scope_worker(int i, long* tid) {
  *tid = syscall(SYS_gettid);
  const std::string name = "thread-" + std::to_string(i);
  gpumemtrace_scope_begin("worker");
  gpumemtrace_scope_begin(name.c_str());
  allocate_and_free(4096 + i);
  gpumemtrace_scope_end(name.c_str());
  gpumemtrace_scope_end("worker");
}

int run_threads(int n) {
  std::vector<std::thread> threads;
  std::vector<long> tids(n);
  for (int i = 0; i < n; ++i) threads.emplace_back(scope_worker, i, &tids[i]);
  for (auto& t : threads) t.join();
  for (int i = 0; i < n; ++i) printf("tid %d %ld\n", i, tids[i]);
  return 0;
}

int run_long() {
  std::string name250;
  for (int i = 0; name250.size() < 250; ++i) name250 += "tests/test_models.py::test_" + std::to_string(i) + "/";
  name250.resize(250);
  std::string name1024(1022, 'n');
  name1024 += "\xC3\xA9";  // U+00E9: bytes 1023 and 1024
  for (const std::string* name : {&name250, &name1024}) {
    gpumemtrace_scope_begin(name->c_str());
    allocate_and_free(5555);
    gpumemtrace_scope_end(name->c_str());
  }
  printf("%s\n", name250.c_str());
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "nested") == 0) return run_nested();
  if (strcmp(mode, "threads") == 0 && argc > 2) return run_threads(atoi(argv[2]));
  if (strcmp(mode, "long") == 0) return run_long();
  fprintf(stderr, "usage: scopes nested | threads N | long\n");
  return 2;
}
