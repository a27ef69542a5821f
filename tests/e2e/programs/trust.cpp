// tests/e2e/programs/trust.cpp — programs that do to the recorder what real programs do: close or
// reuse its descriptors, end with _exit, die of a signal, catch one. For tests/e2e/test_recorder_trust.py.
//   trust [shared-table] MODE ...  shared-table: first a seccomp filter that refuses unshare and
//                              close_range, as a container's profile may: the recorder's writer thread
//                              then shares the program's descriptor table (its fallback)
//   trust closefrom FILE N     allocates 10000 bytes, closes every fd above 2, opens FILE, then makes N
//                              allocations (10001+i) while writing its own lines to FILE; checks FILE
//   trust dup2 FILE N          the same, but dup2()s FILE over the trace's descriptor instead of closing
//   trust dup2_unlinked FILE N the same after unlinking the trace file (the recorder cannot reopen it)
//   trust closefrom_race FILE  allocates 7000 (the recorder starts), then a thread closes every fd above
//                              2 and opens FILE, over and over, while the main thread allocates 7001+i
//                              (i < 39) and flushes; prints "lost=N": how often the thread's fresh
//                              descriptor was closed or replaced under it, and "own=ok" when FILE kept
//                              its own bytes
//   trust where                allocates 1001, flushes; prints "fd=N" (the trace's descriptor in the
//                              program's table, -1: none), "writer_fd=N" (in another thread's table)
//                              and "writer_files=N,N,..." (every descriptor of that table but /dev/null)
//   trust close_stdout         allocates 1001, flushes, prints "closing", closes its stdout, then waits
//                              for EOF on stdin
//   trust exit_child MS [_Exit] allocates 1001; a fork child allocates 2002 and 2003, sleeps MS ms and
//                              ends with _exit(0) (or _Exit(0)); the parent allocates 3003, prints child=PID
//   trust vfork                allocates 1001; a vfork child calls _exit(0) at once; allocates 3003
//   trust loop                 allocates 100000+i, prints i, every millisecond, until a signal ends it
//   trust handler before|after installs a SIGTERM handler before (or after) its first allocation (4141),
//                              prints "ready", waits for the signal, allocates 4242, prints "after", exits 0
//   trust exit N               allocates 1001, then exit(N)
//   trust reraise              installs a SIGTERM handler that prints "handled", restores the default
//                              action and raises SIGTERM again (clean up, then die of it); allocates
//                              4141, prints "ready", waits for the signal
//   trust exit_blocked N       allocates 5000 N times, prints "exiting" on stderr, then _exit(0): with
//                              the trace on a pipe nobody reads yet, the exit waits for the writer
//   trust rss                  16 allocate/free pairs, gpumemtrace_flush(), prints "rss_kb=N" (VmRSS)
//   trust writer_lines N       allocates 1001; a thread whose warnings wait for a program thread, as the
//                              recorder's writer thread's do, logs N lines "writer line I" through the
//                              recorder (its internal log_line, found by dlsym); then allocates 1002,
//                              whose recording prints them, writes "allocated 1002" to stderr, exits 0
// The FILE modes exit 3 when FILE holds anything but the program's own bytes, and print "fd=N" (the
// trace's descriptor number they saw) and "own=ok".
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

void allocate(size_t bytes) {
  void* p = nullptr;
  cudaMalloc(&p, bytes);
}

void sleep_ms(int ms) { usleep(ms * 1000); }

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

// The recorder's writer thread then cannot get a descriptor table of its own (docs/security.md).
bool refuse_private_descriptor_tables() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

int (*gpumemtrace_flush_fn())() { return reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpumemtrace_flush")); }

// Each descriptor in the fd directory `fd_dir` (the listing's own left out), with its target.
std::vector<std::pair<int, std::string>> descriptors_in(const std::string& fd_dir) {
  std::vector<std::pair<int, std::string>> found;
  DIR* d = opendir(fd_dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    char link[320], target[4096];
    snprintf(link, sizeof(link), "%s/%s", fd_dir.c_str(), e->d_name);
    const ssize_t n = readlink(link, target, sizeof(target) - 1);
    if (n <= 0 || atoi(e->d_name) == dirfd(d)) continue;
    target[n] = '\0';
    found.emplace_back(atoi(e->d_name), target);
  }
  if (d) closedir(d);
  return found;
}

// The descriptor in the fd directory `fd_dir` whose target is a trace file (the recorder's), and its
// path; -1 when none.
int find_trace_fd(std::string* path, const std::string& fd_dir = "/proc/thread-self/fd") {
  int found = -1;
  for (const auto& [fd, target] : descriptors_in(fd_dir)) {
    if (target.find("/gpumemtrace.") != std::string::npos && target.find(".jsonl") != std::string::npos) {
      found = fd;
      *path = target;
    }
  }
  return found;
}

void close_all_above_stderr() {
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
  rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  for (rlim_t fd = 3; fd < rl.rlim_cur; ++fd) close(static_cast<int>(fd));
}

// Every descriptor in the fd directory `fd_dir` that is not /dev/null, as "N,N,...".
std::string files_in(const std::string& fd_dir) {
  std::string list;
  for (const auto& [fd, target] : descriptors_in(fd_dir))
    if (target != "/dev/null") list += (list.empty() ? "" : ",") + std::to_string(fd);
  return list;
}

// The descriptor of the trace in another thread's table (the writer's own), or -1; `files`: every
// descriptor of that table but /dev/null.
int find_trace_fd_of_other_threads(std::string* files = nullptr) {
  DIR* tasks = opendir("/proc/self/task");
  const long self = syscall(SYS_gettid);
  int found = -1;
  while (dirent* e = tasks ? readdir(tasks) : nullptr) {
    if (e->d_name[0] == '.' || atol(e->d_name) == self) continue;
    std::string path;
    const std::string fd_dir = std::string("/proc/self/task/") + e->d_name + "/fd";
    const int fd = find_trace_fd(&path, fd_dir);
    if (fd < 0) continue;
    found = fd;
    if (files) *files = files_in(fd_dir);
  }
  if (tasks) closedir(tasks);
  return found;
}

int run_own_file(const std::string& how, const char* file, int n, bool shared_table) {
  allocate(10000);  // the recorder starts: its trace file is open from here on
  std::string trace_path;
  const int trace_fd = find_trace_fd(&trace_path);
  printf("fd=%d\n", trace_fd);
  fflush(stdout);
  int own = -1;
  if (how == "closefrom") {
    // In a shared table, let the writer finish starting up (it opens /proc and debug files on its
    // first batch) before every descriptor goes: a descriptor the writer has open at that moment is
    // closed under it and its later close would hit the program's new file (docs/security.md). With
    // a table of its own, there is nothing to wait for.
    if (shared_table)
      if (auto flush = gpumemtrace_flush_fn()) flush();
    close_all_above_stderr();
    own = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  } else {
    if (trace_fd < 0) return 4;
    if (how == "dup2_unlinked") unlink(trace_path.c_str());
    own = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (dup2(own, trace_fd) < 0) return 4;
  }
  if (own < 0) return 4;
  std::string expected;
  for (int i = 0; i < n; ++i) {
    allocate(10001 + i);
    char line[32];
    const int len = snprintf(line, sizeof(line), "own line %d\n", i);
    if (write(own, line, len) != len) return 4;
    expected.append(line, len);
    if (i % 10 == 0) sleep_ms(20);  // several of the writer's flushes happen meanwhile
  }
  close(own);
  FILE* f = fopen(file, "rb");
  std::string got;
  char buf[4096];
  for (size_t k; f && (k = fread(buf, 1, sizeof(buf), f)) > 0;) got.append(buf, k);
  if (f) fclose(f);
  if (got != expected) {
    printf("own=corrupted (%zu bytes, expected %zu)\n", got.size(), expected.size());
    return 3;
  }
  printf("own=ok\n");
  return 0;
}

int run_exit_child(int ms, bool big_exit) {
  allocate(1001);
  const pid_t pid = fork();
  if (pid == 0) {
    allocate(2002);
    allocate(2003);
    if (ms > 0) sleep_ms(ms);
    if (big_exit) _Exit(0);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  allocate(3003);
  printf("child=%d\n", pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int run_vfork() {
  allocate(1001);
  const pid_t pid = vfork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  allocate(3003);
  return 0;
}

int run_loop() {
  for (int i = 0;; ++i) {
    allocate(100000 + i);
    printf("%d\n", i);
    fflush(stdout);
    sleep_ms(1);
  }
}

// The main thread starts the recorder with its first allocation; the writer thread then goes on
// starting up on its own (it reads /proc/self/maps, the ELF and debug files of the first stacks'
// modules) while a second thread closes every descriptor above 2 and opens FILE again, over and over,
// and the main thread keeps allocating. A writer sharing the program's table can close the thread's
// fresh descriptor (moving one of its own high) or have one of its own closed; with a table of its
// own, neither. (The closing starts after the first allocation: the recorder's start on the main
// thread used to make libunwind's pipe in the program's table; it makes none now.)
int run_closefrom_race(const char* file) {
  allocate(7000);
  std::atomic<bool> done{false};
  std::atomic<int> lost{0}, rounds{0};
  bool own_ok = true;
  std::thread closer([&] {
    for (int attempt = 0; attempt < 1000000 && (!done.load() || rounds.load() < 100); ++attempt) {
      close_all_above_stderr();
      const int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) continue;
      struct stat opened, now;
      fstat(fd, &opened);
      for (int i = 0; i < 50; ++i) sched_yield();  // the moment the writer might act in
      if (fstat(fd, &now) != 0 || now.st_ino != opened.st_ino || now.st_dev != opened.st_dev) {
        lost.fetch_add(1);
        continue;
      }
      const char line[] = "own line\n";
      char back[sizeof(line)] = {};
      if (pwrite(fd, line, sizeof(line) - 1, 0) != sizeof(line) - 1 || pread(fd, back, sizeof(line) - 1, 0) != sizeof(line) - 1 ||
          strcmp(back, line) != 0)
        own_ok = false;
      rounds.fetch_add(1);
    }
  });
  for (int i = 0; i < 39; ++i) {
    allocate(7001 + i);
    if (i % 10 == 0)
      if (auto flush = gpumemtrace_flush_fn()) flush();
  }
  done.store(true);
  closer.join();
  printf("lost=%d\n%s\n", lost.load(), own_ok ? "own=ok" : "own=corrupted");
  return 0;
}

int run_where() {
  allocate(1001);
  if (auto flush = gpumemtrace_flush_fn()) flush();
  std::string path, writer_files;
  const int writer_fd = find_trace_fd_of_other_threads(&writer_files);
  printf("fd=%d\nwriter_fd=%d\nwriter_files=%s\n", find_trace_fd(&path), writer_fd, writer_files.c_str());
  return 0;
}

int run_close_stdout() {
  allocate(1001);
  if (auto flush = gpumemtrace_flush_fn()) flush();
  printf("closing\n");
  fflush(stdout);
  close(STDOUT_FILENO);
  char buf[64];
  while (read(STDIN_FILENO, buf, sizeof buf) > 0) {
  }
  allocate(1002);
  return 0;
}

volatile sig_atomic_t g_got_signal = 0;
void on_term(int) {
  const char msg[] = "handled\n";
  ssize_t ignored = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
  g_got_signal = 1;
}

void install_term_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

int run_handler(const std::string& when) {
  if (when == "before") install_term_handler();
  allocate(4141);
  if (when == "after") install_term_handler();
  printf("ready\n");
  fflush(stdout);
  for (int waited = 0; !g_got_signal && waited < 20000; ++waited) sleep_ms(1);
  allocate(4242);
  printf("after\n");
  return 0;
}

void die_of_term(int) {
  const char msg[] = "handled\n";
  ssize_t ignored = write(STDOUT_FILENO, msg, sizeof(msg) - 1);
  (void)ignored;
  signal(SIGTERM, SIG_DFL);
  raise(SIGTERM);
}

int run_reraise() {
  struct sigaction sa = {};
  sa.sa_handler = die_of_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  allocate(4141);
  printf("ready\n");
  fflush(stdout);
  for (int waited = 0; waited < 20000; ++waited) sleep_ms(1);
  return 0;
}

int run_exit_blocked(int n) {
  for (int i = 0; i < n; ++i) allocate(5000);
  fprintf(stderr, "exiting\n");
  _exit(0);
}

int run_rss() {
  for (int i = 0; i < 16; ++i) {
    void* p = nullptr;
    cudaMalloc(&p, 1 << 20);
    cudaFree(p);
  }
  if (auto flush = gpumemtrace_flush_fn()) flush();
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long rss_kb = -1;
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, "VmRSS:", 6) == 0) rss_kb = atol(line + 6);
  if (f) fclose(f);
  printf("rss_kb=%ld\n", rss_kb);
  return rss_kb > 0 ? 0 : 1;
}

// The recorder's internal functions (interpose/recorder/recorder.h), found in the preloaded library.
template <typename Fn>
Fn recorder_function(const char* mangled_name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, mangled_name));
}

int run_writer_lines(int n) {
  allocate(1001);
  auto route = recorder_function<void (*)()>("_ZN11gpumemtrace39route_log_lines_through_program_threadsEv");
  auto log_line = recorder_function<void (*)(const char*)>("_ZN11gpumemtrace8log_lineEPKc");
  if (!route || !log_line) return fprintf(stderr, "trust: the recorder's log_line is not loaded\n"), 4;
  std::thread writer_like([&] {
    route();
    for (int i = 0; i < n; ++i) log_line(("writer line " + std::to_string(i)).c_str());
  });
  writer_like.join();
  allocate(1002);
  fprintf(stderr, "allocated 1002\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool shared_table = argc > 1 && !strcmp(argv[1], "shared-table");
  if (shared_table) {
    if (!refuse_private_descriptor_tables()) return perror("seccomp"), 5;
    --argc;
    ++argv;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  if ((mode == "closefrom" || mode == "dup2" || mode == "dup2_unlinked") && argc == 4)
    return run_own_file(mode, argv[2], atoi(argv[3]), shared_table);
  if (mode == "closefrom_race" && argc == 3) return run_closefrom_race(argv[2]);
  if (mode == "where") return run_where();
  if (mode == "close_stdout") return run_close_stdout();
  if (mode == "exit_child" && argc >= 3) return run_exit_child(atoi(argv[2]), argc == 4 && !strcmp(argv[3], "_Exit"));
  if (mode == "vfork") return run_vfork();
  if (mode == "loop") return run_loop();
  if (mode == "handler" && argc == 3) return run_handler(argv[2]);
  if (mode == "exit" && argc == 3) {
    allocate(1001);
    exit(atoi(argv[2]));
  }
  if (mode == "reraise") return run_reraise();
  if (mode == "exit_blocked" && argc == 3) return run_exit_blocked(atoi(argv[2]));
  if (mode == "rss") return run_rss();
  if (mode == "writer_lines" && argc == 3) return run_writer_lines(atoi(argv[2]));
  fprintf(stderr, "usage: trust [shared-table] closefrom|dup2|dup2_unlinked FILE N | closefrom_race FILE | where | "
                  "close_stdout | exit_child MS [_Exit] | vfork | loop | handler before|after | exit N | reraise | "
                  "exit_blocked N | rss | writer_lines N\n");
  return 2;
}
