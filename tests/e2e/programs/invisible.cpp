// tests/e2e/programs/invisible.cpp — what a program could notice of the recorder: descriptors, its
// stderr. For tests/e2e/test_invisible.py.
//   invisible fds            allocates 1001 bytes from ten nested frames and 1002 from a signal handler
//                            (libunwind's slow paths run), flushes the trace, then prints every
//                            descriptor in its table ("fds=0,1,2")
//   invisible stderr FILE    closes its stderr, opens FILE (it gets descriptor 2), allocates 1001 bytes
//                            (the recorder starts and has something to say: the test sets a bad
//                            variable), writes "own line" to FILE, and prints FILE's content
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void allocate(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
}

#define NEST(name, next) \
  __attribute__((noinline)) void name() { next(); asm volatile(""); }
__attribute__((noinline)) void nest_bottom() { allocate(1001); }
NEST(nest9, nest_bottom) NEST(nest8, nest9) NEST(nest7, nest8) NEST(nest6, nest7) NEST(nest5, nest6)
NEST(nest4, nest5) NEST(nest3, nest4) NEST(nest2, nest3) NEST(nest1, nest2)

void allocate_in_handler(int) { allocate(1002); }

std::string descriptors() {
  std::string list;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
    list += (list.empty() ? "" : ",") + std::string(e->d_name);
  }
  if (d) closedir(d);
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "fds") {
    nest1();
    signal(SIGUSR1, allocate_in_handler);
    raise(SIGUSR1);
    if (auto flush = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpumemtrace_flush"))) flush();
    printf("fds=%s\n", descriptors().c_str());
    return 0;
  }
  if (mode == "stderr" && argc == 3) {
    close(STDERR_FILENO);
    const int fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd != STDERR_FILENO) return 4;
    allocate(1001);
    const char own[] = "own line\n";
    if (write(fd, own, sizeof own - 1) != sizeof own - 1) return 4;
    char buf[4096] = {};
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    printf("%s", n > 0 ? buf : "");
    return 0;
  }
  fprintf(stderr, "usage: invisible fds | stderr FILE\n");
  return 2;
}
