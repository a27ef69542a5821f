// tests/e2e/programs/scenarios.cpp — process and thread scenarios for the recorder's end-to-end tests.
//   scenarios threads N M      N threads, each M cudaMalloc/cudaFree pairs of size 4096*(thread+1)+i%7
//   scenarios fork             parent allocates 1001 bytes, child 2002 bytes, parent 3003 after wait
//   scenarios exec PROGRAM...  allocates 4004 bytes, then execs PROGRAM (inherits LD_PRELOAD)
//   scenarios execl PROGRAM    the same through execl(PROGRAM, PROGRAM, "depth", NULL)
//   scenarios killed K         K allocations, prints "ready", then sleeps until killed
//   scenarios exit_thread      3 threads allocate in a loop; a 4th calls exit(0) mid-run
//   scenarios none             never calls CUDA
//   scenarios depth            allocates 5005 bytes from 10 nested functions
//   scenarios dlopen PLUGIN   allocates 1 byte, dlopens PLUGIN, calls its plugin_allocate() (8008 bytes)
//   scenarios flush            allocates 6006 bytes, calls gpumemtrace_flush(), prints its result, sleeps
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

void thread_worker(int t, int m) {
  for (int i = 0; i < m; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 4096 * (t + 1) + i % 7);
    cudaFree(p);
  }
}

int run_threads(int n, int m) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(thread_worker, t, m);
  for (auto& th : threads) th.join();
  return 0;
}

void allocate_in_parent(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
}
void allocate_in_child() {
  void* p = nullptr;
  cudaMalloc(&p, 2002);
}

int run_fork() {
  allocate_in_parent(1001);
  pid_t pid = fork();
  if (pid == 0) {
    allocate_in_child();
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  allocate_in_parent(3003);
  printf("child=%d\n", pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int run_exec(char** argv) {
  void* p = nullptr;
  cudaMalloc(&p, 4004);
  fflush(stdout);
  execv(argv[0], argv);
  perror("execv");
  return 1;
}

void allocate_before_kill(int i) {
  void* p = nullptr;
  cudaMalloc(&p, 100000 + i);
}

int run_killed(int k) {
  for (int i = 0; i < k; ++i) allocate_before_kill(i);
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

std::atomic<bool> g_stop{false};
void allocate_until_exit(int t) {
  for (int i = 0; !g_stop.load(); ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 512 * (t + 1));
    cudaFree(p);
  }
}

int run_exit_thread() {
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(allocate_until_exit, t);
  std::thread exiter([] {
    usleep(50000);
    void* p = nullptr;
    cudaMalloc(&p, 7007);  // the last event before exit: it must be in the trace
    exit(0);
  });
  for (auto& th : threads) th.join();
  exiter.join();
  return 1;
}

#define NEST(name, next) \
  __attribute__((noinline)) void name() { next(); asm volatile(""); }
__attribute__((noinline)) void nest_bottom() {
  void* p = nullptr;
  cudaMalloc(&p, 5005);
  asm volatile("");
}
NEST(nest9, nest_bottom) NEST(nest8, nest9) NEST(nest7, nest8) NEST(nest6, nest7) NEST(nest5, nest6)
NEST(nest4, nest5) NEST(nest3, nest4) NEST(nest2, nest3) NEST(nest1, nest2)

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "threads" && argc == 4) return run_threads(atoi(argv[2]), atoi(argv[3]));
  if (mode == "fork") return run_fork();
  if (mode == "exec" && argc > 2) return run_exec(argv + 2);
  if (mode == "execl" && argc == 3) {
    void* p = nullptr;
    cudaMalloc(&p, 4004);
    execl(argv[2], argv[2], "depth", static_cast<char*>(nullptr));
    return 1;
  }
  if (mode == "killed" && argc == 3) return run_killed(atoi(argv[2]));
  if (mode == "exit_thread") return run_exit_thread();
  if (mode == "none") return 0;
  if ((mode == "dlopen" || mode == "dlclose") && argc == 3) {
    void* p = nullptr;
    cudaMalloc(&p, 1);  // the trace starts before the plugin is loaded ...
    if (auto flush = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpumemtrace_flush"))) flush();  // ... for sure
    void* plugin = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) return 3;
    reinterpret_cast<void (*)()>(dlsym(plugin, "plugin_allocate"))();
    // dlclose: unloaded at once, before the writer thread has seen the allocation's frames.
    if (mode == "dlclose" && dlclose(plugin) != 0) return 4;
    return 0;
  }
  if (mode == "flush") {
    void* p = nullptr;
    cudaMalloc(&p, 6006);
    auto flush = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpumemtrace_flush"));
    printf("flush=%d\n", flush ? flush() : -100);
    fflush(stdout);
    for (;;) pause();
  }
  if (mode == "depth") {
    nest1();
    return 0;
  }
  fprintf(stderr, "usage: scenarios threads N M | fork | exec PROGRAM... | killed K | exit_thread | none | depth\n");
  return 2;
}
