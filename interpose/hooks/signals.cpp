// interpose/hooks/signals.cpp — sigaction and the calls built on it: the program sees its own signal
// actions, never the recorder's handler (interpose/recorder/signal_flush.cpp).
//
// glibc's signal(), bsd_signal(), sysv_signal() and siginterrupt() call its sigaction internally, not
// through ours, so each is hooked and does what glibc's does, through our sigaction. For every signal
// the recorder has not made its own (all of them before it starts) each is exactly glibc's.
// Not hooked: sigset(), sighold() and the other System V calls, and raw rt_sigaction system calls:
// they reach the kernel directly and, for one of the recorder's signals, replace its handler.
#include <signal.h>

#include <cerrno>

#include "interpose/recorder/recorder.h"
#include "util/runs_before_sanitizers.h"

namespace {

// The signals siginterrupt() made interrupt system calls: signal() installs them without SA_RESTART
// (glibc's _sigintr, kept here since its own siginterrupt is not the one that runs).
sigset_t g_interrupting;

sighandler_t install(int sig, sighandler_t handler, int flags, bool mask_itself) {
  if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) return errno = EINVAL, SIG_ERR;
  struct sigaction act = {}, old = {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (mask_itself) sigaddset(&act.sa_mask, sig);
  act.sa_flags = flags;
  if (sigaction(sig, &act, &old) < 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

extern "C" {

// A sanitizer's runtime installs its handlers through here while it initialises: uninstrumented up to
// the recorder's signals, which are ours only once the recorder started (util/runs_before_sanitizers.h).
GPUMEMTRACE_RUNS_BEFORE_SANITIZERS int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  int rc = 0;
  if (gpumemtrace::recorder_owns_signal(sig) && gpumemtrace::program_sigaction(sig, act, old, &rc)) return rc;
  return gpumemtrace::libc_sigaction(sig, act, old);
}

// BSD semantics, as glibc's: the signal masked while its handler runs, system calls restarted.
sighandler_t signal(int sig, sighandler_t handler) {
  return install(sig, handler, sigismember(&g_interrupting, sig) == 1 ? 0 : SA_RESTART, true);
}

sighandler_t bsd_signal(int sig, sighandler_t handler) { return signal(sig, handler); }

// System V semantics, as glibc's: the handler is reset on delivery and the signal not masked.
sighandler_t sysv_signal(int sig, sighandler_t handler) { return install(sig, handler, SA_RESETHAND | SA_NODEFER, false); }

sighandler_t __sysv_signal(int sig, sighandler_t handler) { return sysv_signal(sig, handler); }

int siginterrupt(int sig, int interrupt) {
  struct sigaction action;
  if (sigaction(sig, nullptr, &action) < 0) return -1;
  if (interrupt) {
    sigaddset(&g_interrupting, sig);
    action.sa_flags &= ~SA_RESTART;
  } else {
    sigdelset(&g_interrupting, sig);
    action.sa_flags |= SA_RESTART;
  }
  return sigaction(sig, &action, nullptr);
}

}  // extern "C"
