// interpose/recorder/signal_flush.cpp — SIGTERM, SIGINT and SIGHUP finish the trace, then do what the
// program asked for.
//
// Without this, a native program killed by one of them loses what it recorded since the last flush
// (up to GPUMEMTRACE_FLUSH_MS), and its trace has no footer. At the recorder's start (the program's
// first CUDA memory call) each signal's disposition is looked at once:
//  - default action (terminate): our handler finishes the trace (drained, footer saying "signal",
//    closed), restores the default action and raises the signal again, so the process still dies of
//    it (the same wait status for its parent);
//  - the program's own handler: ours takes its place with the same mask and flags (SA_RESTART,
//    SA_RESETHAND, SA_ONSTACK, ... keep their meaning), flushes what was recorded, and calls the
//    program's handler with the arguments it expects. When that handler leaves the signal pending
//    with the default action back (clean up, signal(sig, SIG_DFL), raise(sig)), the process dies
//    as soon as ours returns: the trace is finished first;
//  - ignored: left alone.
// A signal that arrives while the trace is already being finished (the process is in exit(), _exit()
// or exec: multiprocessing's Pool.terminate() sends SIGTERM to workers that may be ending by
// os._exit) waits for that footer, at most GPUMEMTRACE_EXIT_TIMEOUT_MS, before its default action
// (finish_trace). A handler the program installs later simply replaces ours; when it ends the process
// with exit() or _exit(), those finish the trace.
// Thread-safety: install_signal_flush() runs in the recorder's start-up (one thread at a time); the
// handler is async-signal-safe (atomics, nanosleep, write, sigaction, sigpending, raise).
#include <signal.h>

#include <cerrno>

#include "interpose/recorder/recorder.h"
#include "interpose/recorder/recorder_state.h"

namespace gpumemtrace {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr const char* kWhen[] = {"at SIGTERM", "at SIGINT", "at SIGHUP"};
constexpr int kCount = sizeof(kSignals) / sizeof(kSignals[0]);
// A program that survives its signal goes on: like gpumemtrace_flush(), wait for the writer this long.
constexpr int kChainedFlushMs = 2000;

// What the program had installed when ours took its place. Written before ours is installed, read
// only by our handler afterwards.
struct sigaction g_program_action[kCount];

int index_of(int sig) {
  for (int i = 0; i < kCount; ++i)
    if (kSignals[i] == sig) return i;
  return -1;
}

// sa_handler and sa_sigaction share storage: the kernel reads SIG_DFL and SIG_IGN there whatever the
// flags say.
bool is_default(const struct sigaction& a) { return a.sa_handler == SIG_DFL; }
bool is_ignored(const struct sigaction& a) { return a.sa_handler == SIG_IGN; }

// True when `sig` ends the process as soon as the running handler returns: pending (a signal is
// blocked while its handler runs) and back at its default action.
bool dies_on_return(int sig) {
  struct sigaction now;
  sigset_t pending;
  return sigaction(sig, nullptr, &now) == 0 && is_default(now) && sigpending(&pending) == 0 &&
         sigismember(&pending, sig) == 1;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const int i = index_of(sig);
  if (i < 0) return;
  const struct sigaction& program = g_program_action[i];
  if (is_default(program)) {
    finish_trace(kWhen[i], ProcessEnd::killed(sig));
    // The signal is blocked while this handler runs: raised again, it stays pending and, with the
    // default action back, ends the process as soon as the handler returns.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, nullptr);
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
  for (int i = 0; i < kCount; ++i) {
    struct sigaction current;
    if (sigaction(kSignals[i], nullptr, &current) != 0) continue;
    // Ours already: a fork child, or a restart after a failed exec.
    if (current.sa_sigaction == on_signal || is_ignored(current)) continue;
    g_program_action[i] = current;
    struct sigaction replacement = current;  // the program's mask and flags
    if (is_default(current)) {
      sigemptyset(&replacement.sa_mask);
      replacement.sa_flags = SA_RESTART;
    }
    replacement.sa_flags |= SA_SIGINFO;
    replacement.sa_sigaction = on_signal;
    sigaction(kSignals[i], &replacement, nullptr);
  }
  errno = saved_errno;
}

}  // namespace gpumemtrace
