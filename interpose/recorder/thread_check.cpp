// interpose/recorder/thread_check.cpp — see thread_check.h.
#include "interpose/recorder/thread_check.h"

#include <dlfcn.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace gpumemtrace {
namespace {

// glibc's rseq signature (sys/rseq.h, bits/rseq.h): what it registers each thread with.
#if defined(__x86_64__)
constexpr uint32_t kRseqSignature = 0x53053053;
#elif defined(__aarch64__)
constexpr uint32_t kRseqSignature = 0xd428bc00;
#else
constexpr uint32_t kRseqSignature = 0;
#endif

// The child's results, as its exit status.
constexpr int kRseqRefused = 1;
constexpr int kFutexRefused = 2;

// A 32-byte struct rseq for the child to register (its own; the kernel forgets it when the child ends).
struct alignas(32) RseqArea {
  uint32_t cpu_id_start, cpu_id;
  uint64_t rseq_cs;
  uint32_t flags;
  uint32_t pad[3];
};
RseqArea g_probe_area;
alignas(16) char g_probe_stack[64 * 1024];

bool g_probe_rseq = false;

// Runs in the child: system calls only (it shares the program's memory), then exit_group.
int probe(void*) {
  // A filter that answers with SIGSYS must not run the program's handler in here.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } default_action{reinterpret_cast<void*>(SIG_DFL), 0, nullptr, 0};
  syscall(SYS_rt_sigaction, SIGSYS, &default_action, nullptr, sizeof(unsigned long));
  int refused = 0;
#ifdef SYS_rseq
  // The child starts unregistered (CLONE_VM): success registers its own area, as a new thread would.
  if (g_probe_rseq && syscall(SYS_rseq, &g_probe_area, sizeof g_probe_area, 0, kRseqSignature) != 0) refused |= kRseqRefused;
#endif
  uint32_t word = 0;
  if (syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0) < 0) refused |= kFutexRefused;
  syscall(SYS_exit_group, refused);
  return refused;
}

// Whether glibc registers rseq for the threads this one creates: only when this thread's own
// registration succeeded (its area's cpu_id is a CPU number). Looked up at run time: a library built
// against glibc 2.35 must still load on an older one (which never registers rseq).
bool new_threads_register_rseq() {
#if defined(__x86_64__) || defined(__aarch64__)
  const auto* offset = static_cast<const std::ptrdiff_t*>(dlsym(RTLD_DEFAULT, "__rseq_offset"));
  const auto* size = static_cast<const unsigned int*>(dlsym(RTLD_DEFAULT, "__rseq_size"));
  if (!offset || !size || *size == 0) return false;
  const auto* area = reinterpret_cast<const RseqArea*>(static_cast<const char*>(__builtin_thread_pointer()) + *offset);
  return static_cast<int32_t>(__atomic_load_n(&area->cpu_id, __ATOMIC_RELAXED)) >= 0;
#else
  return false;
#endif
}

}  // namespace

std::string thread_start_refusal() {
  const int saved_errno = errno;
  const int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
  if (mode == 0) return "";  // no filter: nothing can be refused
#if defined(__SANITIZE_THREAD__)
  // make tsan's build only: ThreadSanitizer keeps each thread's state in its TLS, and the CLONE_VM
  // child below runs on the parent's, so its steps corrupt the parent's happens-before history (every
  // later handoff to the writer is then reported as a race). That build does not probe; the tests that
  // need the probe skip themselves under it (tests/testenv.py, PROBE_UNDER_TSAN).
  return "";
#endif
  g_probe_rseq = new_threads_register_rseq();
  // No exit signal (the low byte of the flags): the program sees no SIGCHLD; __WALL waits for it.
  const int pid = clone(probe, g_probe_stack + sizeof g_probe_stack, CLONE_VM | CLONE_VFORK, nullptr);
  int status = 0;
  const bool waited = pid > 0 && waitpid(pid, &status, __WALL) == pid;
  errno = saved_errno;
  // Could not tell (clone refused: then the writer's pthread_create fails and says so): go on.
  if (!waited) return "";
  if (!WIFEXITED(status)) {
    return "a seccomp filter kills a process that makes the system calls a new thread needs (rseq, futex)";
  }
  const int refused = WEXITSTATUS(status);
  if (refused & kRseqRefused) {
    return "a seccomp filter refuses the rseq system call, which glibc needs to start a thread (it would "
           "abort the process)";
  }
  if (refused & kFutexRefused) return "a seccomp filter refuses the futex system call, which threads need";
  return "";
}

}  // namespace gpumemtrace
