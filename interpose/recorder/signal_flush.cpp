// interpose/recorder/signal_flush.cpp — SIGTERM, SIGINT, SIGHUP and SIGABRT finish the trace, then do
// what the program asked for; the program never sees that our handler is there.
//
// Without this, a native program killed by one of them loses what it recorded since the last flush
// (up to GPUMEMTRACE_FLUSH_MS), and its trace has no footer (abort() is how CUDA_CHECK ends a program).
// At the recorder's start (the program's first CUDA memory call) our handler becomes the kernel's
// action for each of them, and what the program had becomes "the program's action", which from then
// on is all the program sees and sets (the hooks of interpose/hooks/signals.cpp: sigaction, signal,
// ...; docs/capture.md):
//  - the program's action is the default (terminate): ours finishes the trace (drained, footer saying
//    "signal", closed), puts the default action back and raises the signal again, so the process still
//    dies of it (the same wait status for its parent);
//  - a handler of the program's: ours runs with its mask and flags (SA_RESTART, SA_ONSTACK, SA_NODEFER
//    keep their meaning; SA_RESETHAND is done here, on the program's action), flushes what was
//    recorded, and calls the program's handler with the arguments it expects. When that handler leaves
//    the signal pending with the default action back (clean up, signal(sig, SIG_DFL), raise(sig)),
//    ours runs again as soon as it returns, and the process dies of it with the trace finished;
//  - ignored: the kernel ignores it (SIG_IGN is its action, as the program asked: it survives exec).
// sigaction(sig, NULL, &old) answers the program's action, never ours: a library that chains to "the
// previous handler" chains to the program's, not to ours (which would end an exit-0 program by the
// signal). A disposition changed behind the hooks (a raw rt_sigaction system call; glibc's own sigset)
// replaces ours: the next query sees it and the signal is left to it from then on.
// A signal that arrives while the trace is already being finished (the process is in exit(), _exit()
// or exec: multiprocessing's Pool.terminate() sends SIGTERM to workers that may be ending by
// os._exit) waits for that footer, at most GPUMEMTRACE_EXIT_TIMEOUT_MS, before its default action
// (finish_trace).
// A vfork child (posix_spawn's; CPython's subprocess, which sets every handler back to the default
// before its exec) shares this memory, and so these slots, with its parent, but has signal actions of
// its own: what it sets goes to its own kernel action only, never into the parent's slots (else the
// parent's next SIGINT would find "the default" there and end it).
// Thread-safety: the program's action of each signal is written under a spin lock with the signal
// blocked in the writing thread, read by the handler through a sequence count (it never waits on
// the code it interrupted); the handler is async-signal-safe (atomics, nanosleep, write, sigaction,
// sigpending, raise).
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "interpose/recorder/fork_marker.h"
#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"
#include "util/runs_before_sanitizers.h"

namespace gpumemtrace {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGABRT};
constexpr const char* kWhen[] = {"at SIGTERM", "at SIGINT", "at SIGHUP", "at SIGABRT"};
constexpr int kCount = sizeof(kSignals) / sizeof(kSignals[0]);
// A program that survives its signal goes on: like gpumemtrace_flush(), wait for the writer this long.
constexpr int kChainedFlushMs = 2000;

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
// glibc's (the next definition after ours), for the hooks' pass-through. Looked up once (dlsym takes
// the loader's lock): at the recorder's start, or at the program's first sigaction call before it.
// Uninstrumented: a sanitizer's runtime may come here before it is initialised (libc_sigaction).
SigactionFn g_next_sigaction = nullptr;
GPUMEMTRACE_RUNS_BEFORE_SANITIZERS SigactionFn next_sigaction() {
  SigactionFn fn = __atomic_load_n(&g_next_sigaction, __ATOMIC_ACQUIRE);
  if (!fn) {
    fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    __atomic_store_n(&g_next_sigaction, fn, __ATOMIC_RELEASE);
  }
  return fn;
}
// Where this library sets the kernel's action: the first definition in the process (a sanitizer's
// interceptor, which must see every handler, else ours), with t_setting_kernel_action set so that our
// own hook passes it through. Resolved at install, on a program thread.
std::atomic<SigactionFn> g_first_sigaction{nullptr};
__thread bool t_setting_kernel_action __attribute__((tls_model("initial-exec"))) = false;

// Per signal of kSignals: its kernel action is ours (or SIG_IGN as the program asked), and the program's
// is in its Slot. Read by the sigaction hook, uninstrumented: atomic builtins, no std::atomic.
bool g_owned[kCount];
// The process whose slots these are: the one that installed them, or the fork child that copied them
// (signal_flush_on_fork_child). Another pid in the same address space is a vfork child.
pid_t g_slots_pid = 0;

// One signal's state. `program` is written under `lock` (a spin lock, taken with the signal blocked in
// the writing thread) and read through `seq` (odd while being written) word by word.
struct Slot {
  std::atomic<int> lock{0};
  std::atomic<unsigned> seq{0};
  alignas(8) struct sigaction program;  // what the program sees and set
};
Slot g_slots[kCount];

int index_of(int sig) {
  for (int i = 0; i < kCount; ++i)
    if (kSignals[i] == sig) return i;
  return -1;
}

// sa_handler and sa_sigaction share storage: the kernel reads SIG_DFL and SIG_IGN there whatever the
// flags say.
bool is_default(const struct sigaction& a) { return a.sa_handler == SIG_DFL; }
bool is_ignored(const struct sigaction& a) { return a.sa_handler == SIG_IGN; }

constexpr size_t kWords = sizeof(struct sigaction) / sizeof(uint64_t);
static_assert(sizeof(struct sigaction) % sizeof(uint64_t) == 0, "struct sigaction is copied word by word");

// Acquire loads: the reader's check of `seq` after the copy cannot move before it (no fence, which
// ThreadSanitizer does not model).
void copy_words(uint64_t* to, const uint64_t* from) {
  for (size_t i = 0; i < kWords; ++i) __atomic_store_n(&to[i], __atomic_load_n(&from[i], __ATOMIC_ACQUIRE), __ATOMIC_RELAXED);
}

// The program's action of slot `s`, as one consistent copy. Async-signal-safe.
struct sigaction read_program(const Slot& s) {
  struct sigaction out;
  for (;;) {
    const unsigned before = s.seq.load(std::memory_order_acquire);
    if (before & 1) continue;  // another thread is writing it (never the one this handler interrupted)
    copy_words(reinterpret_cast<uint64_t*>(&out), reinterpret_cast<const uint64_t*>(&s.program));
    if (s.seq.load(std::memory_order_relaxed) == before) return out;
  }
}

void write_program(Slot& s, const struct sigaction& a) {
  s.seq.fetch_add(1, std::memory_order_acq_rel);
  copy_words(reinterpret_cast<uint64_t*>(&s.program), reinterpret_cast<const uint64_t*>(&a));
  s.seq.fetch_add(1, std::memory_order_release);
}

// Holds slot `sig`'s lock with `sig` blocked in this thread (so its handler never spins on a lock the
// code it interrupted holds).
class SlotLock {
 public:
  SlotLock(Slot& s, int sig) : s_(s) {
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    pthread_sigmask(SIG_BLOCK, &only, &saved_);
    while (s_.lock.exchange(1, std::memory_order_acquire)) {
    }
  }
  ~SlotLock() {
    s_.lock.store(0, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;

 private:
  Slot& s_;
  sigset_t saved_;
};

int set_kernel_action(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn first = g_first_sigaction.load(std::memory_order_acquire);
  if (!first) first = next_sigaction();
  if (!first) return errno = ENOSYS, -1;
  t_setting_kernel_action = true;
  const int rc = first(sig, act, old);
  t_setting_kernel_action = false;
  return rc;
}

void on_signal(int sig, siginfo_t* info, void* context);

bool is_ours(const struct sigaction& a) { return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_signal; }

// Our handler as the kernel's action, carrying `program`'s mask and flags (a default action gets an
// empty mask and SA_RESTART: our flush must not make the program's system calls fail with EINTR).
int install_ours(int sig, const struct sigaction& program) {
  struct sigaction ours = program;
  if (is_default(program)) {
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
  }
  ours.sa_flags = (ours.sa_flags | SA_SIGINFO) & ~SA_RESETHAND;  // SA_RESETHAND: done on the program's
  ours.sa_sigaction = on_signal;
  return set_kernel_action(sig, &ours, nullptr);
}

// True when `sig` ends the process as soon as the running handler returns: pending (a signal is
// blocked while its handler runs) and back at its default action (set behind the hooks: abort() does).
bool dies_on_return(int sig) {
  struct sigaction now;
  sigset_t pending;
  return set_kernel_action(sig, nullptr, &now) == 0 && is_default(now) && sigpending(&pending) == 0 &&
         sigismember(&pending, sig) == 1;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int i = index_of(sig);
  if (i < 0) return;
  Slot& slot = g_slots[i];
  struct sigaction program = read_program(slot);
  if (is_ignored(program)) return;  // set meanwhile; the kernel ignores it from now on
  if (!is_default(program) && (program.sa_flags & SA_RESETHAND)) {
    // The kernel resets such a handler on delivery, before it runs: so do we, on the program's action.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    SlotLock lock(slot, sig);
    write_program(slot, dfl);
  }
  if (is_default(program)) {
    finish_trace(kWhen[i], ProcessEnd::killed(sig));
    // The signal is blocked while this handler runs: raised again, it stays pending and, with the
    // default action back, ends the process as soon as the handler returns.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    set_kernel_action(sig, &dfl, nullptr);
    raise(sig);
    errno = saved_errno;
    return;
  }
  flush_now(kChainedFlushMs);
  errno = saved_errno;
  if (program.sa_flags & SA_SIGINFO)
    program.sa_sigaction(sig, info, context);
  else
    program.sa_handler(sig);
  if (dies_on_return(sig)) {
    const int program_errno = errno;  // what the interrupted code gets back is the program's business
    finish_trace(kWhen[i], ProcessEnd::killed(sig));
    errno = program_errno;
  }
}

}  // namespace

void install_signal_flush() noexcept {
  const int saved_errno = errno;
  if (!g_first_sigaction.load(std::memory_order_acquire))
    g_first_sigaction.store(reinterpret_cast<SigactionFn>(dlsym(RTLD_DEFAULT, "sigaction")), std::memory_order_release);
  (void)next_sigaction();  // resolved now, not first in a handler
  __atomic_store_n(&g_slots_pid, getpid(), __ATOMIC_RELEASE);
  for (int i = 0; i < kCount; ++i) {
    Slot& slot = g_slots[i];
    if (__atomic_load_n(&g_owned[i], __ATOMIC_ACQUIRE)) continue;  // a fork child, a restart after exec failed
    SlotLock lock(slot, kSignals[i]);
    struct sigaction current;
    if (set_kernel_action(kSignals[i], nullptr, &current) != 0) continue;
    write_program(slot, current);
    if (is_ignored(current) || install_ours(kSignals[i], current) == 0) {
      __atomic_store_n(&g_owned[i], true, __ATOMIC_RELEASE);
    }
  }
  errno = saved_errno;
}

bool program_sigaction(int sig, const struct sigaction* act, struct sigaction* old, int* rc) noexcept {
  if (t_setting_kernel_action) return false;  // our own setting, passed on by a sanitizer's interceptor
  const int i = index_of(sig);
  if (i < 0 || !__atomic_load_n(&g_owned[i], __ATOMIC_ACQUIRE)) return false;
  Slot& slot = g_slots[i];
  if (getpid() != __atomic_load_n(&g_slots_pid, __ATOMIC_ACQUIRE) && !copied_without_fork_handler()) {
    // A vfork child: the slots are its parent's (see the top). Its own action is set as asked; the
    // program's action it reads is its parent's, which it inherited. No lock: the parent's other
    // threads go on, and nothing is written here.
    if (old) *old = read_program(slot);
    *rc = act ? set_kernel_action(sig, act, nullptr) : 0;
    return true;
  }
  const int saved_errno = errno;
  SlotLock lock(slot, sig);
  // Behind the hooks, someone else may have set the kernel's action since (a raw system call): then
  // that is the program's, and the signal is not ours any more.
  struct sigaction kernel;
  if (set_kernel_action(sig, nullptr, &kernel) != 0) return false;
  const struct sigaction program = read_program(slot);
  if (!is_ours(kernel) && !(is_ignored(kernel) && is_ignored(program))) {
    __atomic_store_n(&g_owned[i], false, __ATOMIC_RELEASE);
    errno = saved_errno;
    return false;
  }
  if (act) {
    // The kernel's action: SIG_IGN as asked (the kernel drops the signal; it survives exec), else ours.
    const int set = is_ignored(*act) ? set_kernel_action(sig, act, nullptr) : install_ours(sig, *act);
    if (set != 0) {
      *rc = -1;  // errno as the kernel said
      return true;
    }
    write_program(slot, *act);
  }
  if (old) *old = program;
  errno = saved_errno;
  *rc = 0;
  return true;
}

void signal_flush_on_fork_child() noexcept { __atomic_store_n(&g_slots_pid, getpid(), __ATOMIC_RELEASE); }

GPUMEMTRACE_RUNS_BEFORE_SANITIZERS bool recorder_owns_signal(int sig) noexcept {
  for (int i = 0; i < kCount; ++i)
    if (kSignals[i] == sig) return __atomic_load_n(&g_owned[i], __ATOMIC_ACQUIRE);
  return false;
}

GPUMEMTRACE_RUNS_BEFORE_SANITIZERS int libc_sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  SigactionFn real = next_sigaction();
  if (!real) return errno = ENOSYS, -1;
  return real(sig, act, old);
}

}  // namespace gpumemtrace
