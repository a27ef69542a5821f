// interpose/recorder/thread_check.cpp — see thread_check.h.
#include "interpose/recorder/thread_check.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "interpose/recorder/program_strings.h"
#include "interpose/recorder/recorder.h"

#ifndef SYS_clone3
#define SYS_clone3 435  // Linux 5.3; the same number on every architecture
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

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

// A 32-byte struct rseq for the child to register (its own; the kernel forgets it when the child ends).
struct alignas(32) RseqArea {
  uint32_t cpu_id_start, cpu_id;
  uint64_t rseq_cs;
  uint32_t flags;
  uint32_t pad[3];
};
RseqArea g_probe_area;
uint32_t g_futex_word;
timespec g_no_time;
alignas(16) char g_probe_stack[64 * 1024];

// What a refusal (an error the kernel would not give for these arguments) means for the recorder.
enum class Refusal {
  Harmless,   // its users handle the error
  Fatal,      // the recorder cannot run (rseq: glibc aborts the process; futex: no lock works): said below
  Degraded,   // a kill leaves tracing possible without it (the page checks: program_strings.h)
};

// Every system call the recorder makes on the program's threads or in its writer thread, with
// arguments for which the kernel changes nothing (an invalid descriptor, a zero length, a null
// pointer, a query), in the order the probe makes them.
struct Probe {
  const char* name;
  long number;
  long args[6];
  Refusal refusal;
  int expected_errno;  // what the kernel answers when the call is allowed (0: success)
};

const Probe kProbes[] = {
    {"rt_sigaction", SYS_rt_sigaction, {SIGSYS, 0, 0, 8}, Refusal::Harmless, 0},
    {"rseq", SYS_rseq, {reinterpret_cast<long>(&g_probe_area), sizeof(RseqArea), 0, kRseqSignature},
     Refusal::Fatal, 0},
    {"futex", SYS_futex, {reinterpret_cast<long>(&g_futex_word), FUTEX_WAKE_PRIVATE, 1}, Refusal::Fatal, 0},
    // A new thread: clone3 (glibc 2.34), or clone where clone3 answers ENOSYS (a container's filter).
    {"clone3", SYS_clone3, {0, 0}, Refusal::Harmless, EINVAL},
    {"clone", SYS_clone, {CLONE_VM | CLONE_THREAD}, Refusal::Harmless, EINVAL},
    {"set_robust_list", SYS_set_robust_list, {0, 0}, Refusal::Harmless, EINVAL},
    {"rt_sigprocmask", SYS_rt_sigprocmask, {SIG_BLOCK, 0, 0, 8}, Refusal::Harmless, 0},
    {"mmap", SYS_mmap, {0, 0, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0}, Refusal::Harmless, EINVAL},
    {"munmap", SYS_munmap, {0, 0}, Refusal::Harmless, EINVAL},
    {"mprotect", SYS_mprotect, {0, 0, PROT_NONE}, Refusal::Harmless, 0},
    {"madvise", SYS_madvise, {0, 0, MADV_DONTNEED}, Refusal::Harmless, 0},
    {"brk", SYS_brk, {0}, Refusal::Harmless, 0},
    {"clock_nanosleep", SYS_clock_nanosleep, {CLOCK_MONOTONIC, 0, reinterpret_cast<long>(&g_no_time), 0},
     Refusal::Harmless, 0},
    {"sched_yield", SYS_sched_yield, {}, Refusal::Harmless, 0},
    {"gettid", SYS_gettid, {}, Refusal::Harmless, 0},
    {"getpid", SYS_getpid, {}, Refusal::Harmless, 0},
    {"getppid", SYS_getppid, {}, Refusal::Harmless, 0},
    {"tgkill", SYS_tgkill, {0, 0, 0}, Refusal::Harmless, EINVAL},
    {"prctl", SYS_prctl, {PR_GET_SECCOMP}, Refusal::Harmless, 0},
    {"uname", SYS_uname, {0}, Refusal::Harmless, EFAULT},
    {"getcwd", SYS_getcwd, {0, 0}, Refusal::Harmless, ERANGE},
    {"openat", SYS_openat, {AT_FDCWD, 0, O_RDONLY}, Refusal::Harmless, EFAULT},
    {"read", SYS_read, {-1, 0, 0}, Refusal::Harmless, EBADF},
    {"pread64", SYS_pread64, {-1, 0, 0, 0}, Refusal::Harmless, EBADF},
    {"write", SYS_write, {-1, 0, 0}, Refusal::Harmless, EBADF},
    {"close", SYS_close, {-1}, Refusal::Harmless, EBADF},
    {"lseek", SYS_lseek, {-1, 0, SEEK_SET}, Refusal::Harmless, EBADF},
    {"ftruncate", SYS_ftruncate, {-1, 0}, Refusal::Harmless, EBADF},
    {"fcntl", SYS_fcntl, {-1, F_GETFD}, Refusal::Harmless, EBADF},
    {"dup3", SYS_dup3, {-1, -1, 0}, Refusal::Harmless, EBADF},
    {"getdents64", SYS_getdents64, {-1, 0, 0}, Refusal::Harmless, EBADF},
    {"newfstatat", SYS_newfstatat, {-1, 0, 0, 0}, Refusal::Harmless, EFAULT},
#ifdef SYS_fstat
    {"fstat", SYS_fstat, {-1, 0}, Refusal::Harmless, EBADF},
#endif
#ifdef SYS_readlink
    {"readlink", SYS_readlink, {0, 0, 0}, Refusal::Harmless, EFAULT},
#endif
    {"readlinkat", SYS_readlinkat, {AT_FDCWD, 0, 0, 0}, Refusal::Harmless, EFAULT},
    {"fstatfs", SYS_fstatfs, {-1, 0}, Refusal::Harmless, EBADF},
    {"ioctl", SYS_ioctl, {-1, TCGETS, 0}, Refusal::Harmless, EBADF},
    {"unshare", SYS_unshare, {0}, Refusal::Harmless, 0},
    {"close_range", SYS_close_range, {2, 1, 0}, Refusal::Harmless, EINVAL},
    {"process_vm_readv", SYS_process_vm_readv, {0, 0, 0, 0, 0, 0}, Refusal::Degraded, 0},
    {"mincore", SYS_mincore, {0, 0, 0}, Refusal::Degraded, 0},
};
constexpr int kProbeCount = sizeof(kProbes) / sizeof(kProbes[0]);

// Shared with the probe child (CLONE_VM): the step it is at (the call a kill interrupted), the calls
// it found refused, and the ones to skip (found killing before, and degraded).
std::atomic<int> g_step{-1};
bool g_refused[kProbeCount];
bool g_skip[kProbeCount];
bool g_probe_rseq = false;
bool g_clone3_missing = false;
bool g_unwinder_killed = false;

// Runs in the child: system calls only (it shares the program's memory), then exit (the thread's
// exit: itself a call the writer thread makes at the end).
int probe(void*) {
  // A filter that answers with SIGSYS must not run the program's handler in here.
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } default_action{reinterpret_cast<void*>(SIG_DFL), 0, nullptr, 0};
  for (int i = 0; i < kProbeCount; ++i) {
    if (g_skip[i]) continue;
    const Probe& p = kProbes[i];
    if (p.number == SYS_rseq && !g_probe_rseq) continue;
    // clone only where clone3 answered ENOSYS: only then does glibc's pthread_create fall back to it.
    if (p.number == SYS_clone && !g_clone3_missing) continue;
    g_step.store(i, std::memory_order_relaxed);
    long args[6];
    for (int a = 0; a < 6; ++a) args[a] = p.args[a];
    if (p.number == SYS_rt_sigaction) args[1] = reinterpret_cast<long>(&default_action);
    if (p.number == SYS_process_vm_readv) args[0] = syscall(SYS_getpid);
    const long result = syscall(p.number, args[0], args[1], args[2], args[3], args[4], args[5]);
    const int error = result < 0 ? errno : 0;
    // clone3 refused with ENOSYS: glibc's pthread_create falls back to clone (probed next).
    if (p.number == SYS_clone3) g_clone3_missing = error == ENOSYS;
    g_refused[i] = error != p.expected_errno && !(p.number == SYS_clone3 && error == ENOSYS);
  }
  g_step.store(kProbeCount, std::memory_order_relaxed);
  syscall(SYS_exit, 0);
  return 0;
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

int index_of(long number) {
  for (int i = 0; i < kProbeCount; ++i)
    if (kProbes[i].number == number) return i;
  return -1;
}

// What one run of the probe child came to.
constexpr int kRanThrough = kProbeCount + 1;
constexpr int kCouldNotRun = -1;

// True when a SIGCHLD from a child of ours would go unnoticed: no handler of the program's, and not
// blocked in this thread (a program that takes it through sigwait or a signalfd blocks it).
bool sigchld_goes_unnoticed() {
  struct sigaction now;
  sigset_t blocked;
  return libc_sigaction(SIGCHLD, nullptr, &now) == 0 && (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN) &&
         !(now.sa_flags & SA_SIGINFO) && pthread_sigmask(SIG_BLOCK, nullptr, &blocked) == 0 &&
         sigismember(&blocked, SIGCHLD) == 0;
}

// Runs the probe child once: kRanThrough, kCouldNotRun (it could not be made: then the writer's
// pthread_create fails and says so), or the index of the call a kill interrupted (kProbeCount: its
// exit). The child is made with the vfork system call where its SIGCHLD goes unnoticed (so that a
// filter that kills clone, or clone3, is met by the child, not by the program), else with clone and
// no exit signal at all; the parent waits in either case until the child has ended.
int run_probe() {
  g_step.store(-1, std::memory_order_relaxed);
  pid_t pid;
#if defined(SYS_vfork)
  if (sigchld_goes_unnoticed()) {
    pid = static_cast<pid_t>(vfork());
    if (pid == 0) probe(nullptr);  // never returns
  } else
#endif
  {
    // No exit signal (the low byte of the flags): the program sees no SIGCHLD; __WALL waits for it.
    pid = clone(probe, g_probe_stack + sizeof g_probe_stack, CLONE_VM | CLONE_VFORK, nullptr);
  }
  if (pid <= 0) return kCouldNotRun;
  int status = 0;
  // Reaped already where SIGCHLD is ignored: then the step it got to says how it ended.
  const bool reaped = waitpid(pid, &status, __WALL) == pid;
  const int step = g_step.load(std::memory_order_relaxed);
  if (reaped ? WIFEXITED(status) : step == kProbeCount) return kRanThrough;
  return step < 0 ? 0 : step;
}

const char* name_of(int killed) { return killed < kProbeCount ? kProbes[killed].name : "exit"; }

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
  for (bool& skip : g_skip) skip = false;
  int killed;
  // A call the recorder can do without kills the child: skip it and probe the rest again.
  while ((killed = run_probe()) >= 0 && killed < kProbeCount && kProbes[killed].refusal == Refusal::Degraded)
    g_skip[killed] = true;
  errno = saved_errno;
  if (killed == kCouldNotRun) return "";
  const bool readv = !g_skip[index_of(SYS_process_vm_readv)], mincore_ok = !g_skip[index_of(SYS_mincore)];
  g_unwinder_killed = !mincore_ok;
  if (!readv || !mincore_ok) restrict_page_checks(readv, mincore_ok);
  if (killed != kRanThrough)
    return std::string("a seccomp filter kills a process that makes the ") + name_of(killed) +
           " system call, which the recorder needs";
  if (g_refused[index_of(SYS_rseq)]) {
    return "a seccomp filter refuses the rseq system call, which glibc needs to start a thread (it would "
           "abort the process)";
  }
  if (g_refused[index_of(SYS_futex)]) return "a seccomp filter refuses the futex system call, which threads need";
  return "";
}

bool unwinder_would_be_killed() { return g_unwinder_killed; }

}  // namespace gpumemtrace
