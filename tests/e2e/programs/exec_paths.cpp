// tests/e2e/programs/exec_paths.cpp — every way a program execs, and execs that fail. For
// tests/e2e/test_exec_paths.py. Each mode allocates 4004 bytes, then execs PROGRAM with the single
// argument "depth" (tests/e2e/programs/scenarios.cpp allocates 5005 bytes then), unless it says otherwise.
//   exec_paths HOW PROGRAM   HOW: execve | fexecve | execveat | raw_execve (syscall(SYS_execve)) |
//                            execl_thread (execl from a thread with a 16 KiB stack) |
//                            execl_altstack (execl from a SIGUSR1 handler on a 16 KiB sigaltstack)
//   exec_paths execl_many PROGRAM   execl with 4,100 arguments: "depth" and 4,099 times "x"
//   exec_paths failing PROGRAM      before the exec that works, three that fail (no such file), with an
//                                   allocation after each (4005, 4006, 4007): one trace, not four
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace {

const char* g_program = nullptr;

void allocate(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
}

void* exec_from_thread(void*) {
  execl(g_program, g_program, "depth", static_cast<char*>(nullptr));
  _exit(5);
}

void exec_from_handler(int) {
  execl(g_program, g_program, "depth", static_cast<char*>(nullptr));
  _exit(5);
}

#define X10 "x", "x", "x", "x", "x", "x", "x", "x", "x", "x"
#define X100 X10, X10, X10, X10, X10, X10, X10, X10, X10, X10
#define X1000 X100, X100, X100, X100, X100, X100, X100, X100, X100, X100

int exec_many() {
  // "depth" and 4,099 "x": 4,100 arguments after the program's name.
  return execl(g_program, g_program, "depth", X1000, X1000, X1000, X1000, X100, X10, X10, X10, X10, X10, X10, X10,
               X10, X10, "x", "x", "x", "x", "x", "x", "x", "x", "x", static_cast<char*>(nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: exec_paths HOW PROGRAM\n");
    return 2;
  }
  const char* how = argv[1];
  g_program = argv[2];
  char* args[] = {const_cast<char*>(g_program), const_cast<char*>("depth"), nullptr};
  allocate(4004);
  fflush(stdout);
  if (!strcmp(how, "execve")) execve(g_program, args, environ);
  if (!strcmp(how, "fexecve")) {
    const int fd = open(g_program, O_RDONLY | O_CLOEXEC);
    fexecve(fd, args, environ);
  }
  if (!strcmp(how, "execveat")) execveat(AT_FDCWD, g_program, args, environ, 0);
  if (!strcmp(how, "raw_execve")) syscall(SYS_execve, g_program, args, environ);
  if (!strcmp(how, "execl_many")) exec_many();
  if (!strcmp(how, "execl_thread")) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16 * 1024);
    pthread_t thread;
    if (pthread_create(&thread, &attr, exec_from_thread, nullptr) != 0) return 4;
    pthread_join(thread, nullptr);
  }
  if (!strcmp(how, "execl_altstack")) {
    // 16 KiB with an inaccessible page below: overflowing it faults instead of corrupting the heap.
    const size_t page = 4096, size = 16 * 1024;
    char* mem = static_cast<char*>(mmap(nullptr, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (mem == MAP_FAILED || mprotect(mem, page, PROT_NONE) != 0) return 4;
    stack_t alt{};
    alt.ss_size = size;
    alt.ss_sp = mem + page;
    sigaltstack(&alt, nullptr);
    struct sigaction sa {};
    sa.sa_handler = exec_from_handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, nullptr);
    raise(SIGUSR1);
  }
  if (!strcmp(how, "failing")) {
    const char* missing[] = {"/nonexistent/a/scenarios", "/nonexistent/b/scenarios", "/nonexistent/c/scenarios"};
    for (int i = 0; i < 3; ++i) {
      if (execv(missing[i], args) == 0) return 4;
      allocate(4005 + i);
    }
    execv(g_program, args);
  }
  perror("exec");
  return 3;
}
