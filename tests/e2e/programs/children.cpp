// tests/e2e/programs/children.cpp — children made every way a program makes them, while the recorder
// runs. For tests/e2e/test_children.py.
//   children HOW N        allocates 1001 bytes (the recorder starts), makes a child HOW, which makes N
//                         allocations of 2000 + i % 7 bytes and ends with _exit(0); the parent waits for
//                         it, allocates 3003 bytes and prints "child=PID status=S". HOW:
//                           fork      fork() (runs the atfork handlers)
//                           _Fork     glibc's _Fork() (runs none)
//                           clone     clone() without CLONE_VM (a copy of the address space)
//                           raw_fork  syscall(SYS_clone, SIGCHLD, ...): fork without libc
//                           clone_vm  clone(CLONE_VM): shares the parent's memory, like a thread
//   children spawn PROGRAM ARGS...   allocates 1001, posix_spawn()s PROGRAM ARGS, waits, allocates 3003
//   children vfork_exec PROGRAM ARGS...  the same through vfork() and execv()
#include <cuda_runtime_api.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace {

void allocate(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
}

int g_n = 0;

int child_body(void*) {
  for (int i = 0; i < g_n; ++i) allocate(2000 + i % 7);
  _exit(0);
}

alignas(16) char g_child_stack[256 * 1024];

pid_t make_child(const char* how) {
  if (!strcmp(how, "fork")) {
    const pid_t pid = fork();
    if (pid == 0) child_body(nullptr);
    return pid;
  }
  if (!strcmp(how, "_Fork")) {
    const pid_t pid = _Fork();
    if (pid == 0) child_body(nullptr);
    return pid;
  }
  if (!strcmp(how, "raw_fork")) {
    const long pid = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) child_body(nullptr);
    return static_cast<pid_t>(pid);
  }
  char* top = g_child_stack + sizeof g_child_stack;
  if (!strcmp(how, "clone")) return clone(child_body, top, SIGCHLD, nullptr);
  if (!strcmp(how, "clone_vm")) return clone(child_body, top, CLONE_VM | SIGCHLD, nullptr);
  return -1;
}

int wait_for(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, __WALL) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: children fork|_Fork|clone|raw_fork|clone_vm N | spawn|vfork_exec PROGRAM ARGS...\n");
    return 2;
  }
  allocate(1001);
  const char* how = argv[1];
  pid_t pid;
  if (!strcmp(how, "spawn")) {
    if (posix_spawn(&pid, argv[2], nullptr, nullptr, argv + 2, environ) != 0) return 4;
  } else if (!strcmp(how, "vfork_exec")) {
    pid = vfork();
    if (pid == 0) {
      execv(argv[2], argv + 2);
      _exit(127);
    }
  } else {
    g_n = atoi(argv[2]);
    fflush(stdout);
    pid = make_child(how);
  }
  if (pid < 0) return 4;
  const int status = wait_for(pid);
  allocate(3003);
  printf("child=%d status=%d\n", pid, status);
  return 0;
}
