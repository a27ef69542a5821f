// interpose/hooks/self_kill.cpp — a process that kills itself with a signal left at its default action
// finishes its trace first.
//
// Why: the recorder's signal handlers (recorder/signal_flush.cpp) only see a signal whose disposition
// was theirs. A program may put the default action back after the recorder started and then kill
// itself: CPython does exactly that when a KeyboardInterrupt (Ctrl-C) goes uncaught
// (Modules/main.c, exit_sigint: signal(SIGINT, SIG_DFL); kill(getpid(), SIGINT)), after its exit
// handlers and without calling exit(), so the trace lost its last events and its footer. Here the
// footer says "signal" with the signal's number, as for a signal that came from outside.
//
// kill() and killpg() are interposed (glibc's killpg calls its kill internally, not through ours):
// raise(), abort() and pthread_kill() reach the kernel through tgkill inside libc. The trace is
// finished only when the signal is certain to end the process at once: aimed at this process (its
// pid, 0 or -(its process group): killpg(getpgrp(), SIGKILL) ends a whole job at once), an action of
// "terminate" or "core" left at SIG_DFL (SIGKILL always), and not blocked by the calling thread (a
// process-directed signal goes to the sending thread first when it does not block it). Anything else
// goes through untouched.
// Thread-safety: as finish_trace(); errno is the kernel's answer to kill() alone.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "interpose/recorder/recorder.h"

namespace {

// Signals whose default action ends the process (signal(7): Term and Core).
bool ends_process_by_default(int sig) {
  switch (sig) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGILL: case SIGTRAP: case SIGABRT: case SIGBUS:
    case SIGFPE: case SIGKILL: case SIGUSR1: case SIGSEGV: case SIGUSR2: case SIGPIPE: case SIGALRM:
    case SIGTERM: case SIGSTKFLT: case SIGXCPU: case SIGXFSZ: case SIGVTALRM: case SIGPROF: case SIGIO:
    case SIGPWR: case SIGSYS:
      return true;
    default:
      return sig >= SIGRTMIN && sig <= SIGRTMAX;
  }
}

bool aimed_at_this_process(pid_t pid) {
  // -1 is every process but the caller (kill(2), Linux).
  return pid == 0 || pid == getpid() || (pid < -1 && -pid == getpgrp());
}

bool kills_this_process_now(pid_t pid, int sig) {
  if (!ends_process_by_default(sig) || !aimed_at_this_process(pid)) return false;
  if (sig == SIGKILL) return true;
  struct sigaction now;
  if (sigaction(sig, nullptr, &now) != 0 || now.sa_handler != SIG_DFL) return false;
  sigset_t blocked;
  return pthread_sigmask(SIG_BLOCK, nullptr, &blocked) == 0 && sigismember(&blocked, sig) == 0;
}

}  // namespace

extern "C" {

int kill(pid_t pid, int sig) {
  const int saved_errno = errno;
  if (kills_this_process_now(pid, sig))
    gpumemtrace::finish_trace("at kill", gpumemtrace::ProcessEnd::killed(sig));
  errno = saved_errno;
  // What glibc's kill does; a raw system call as in exit.cpp (no dlsym from a signal handler).
  return static_cast<int>(syscall(SYS_kill, pid, sig));
}

int killpg(pid_t pgrp, int sig) {
  if (pgrp < 0) return errno = EINVAL, -1;  // what glibc's killpg does
  return kill(-pgrp, sig);
}

}  // extern "C"
