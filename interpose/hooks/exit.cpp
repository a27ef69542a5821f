// interpose/hooks/exit.cpp — _exit and _Exit end the process without exit handlers or ELF
// destructors, so the recorder's shutdown never runs: a fork child ending with _exit (Python
// multiprocessing's fork workers call os._exit) would lose what it recorded since the last flush, or
// leave a file with no events at all. Finish the trace first. (exit() reaches _exit inside libc, not
// through these hooks: by then the recorder's destructor has finished the trace.)
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "interpose/recorder/recorder.h"

namespace {

// What glibc's _exit does. A raw system call rather than the real function looked up with dlsym:
// _exit is async-signal-safe and called from signal handlers and vfork children, where the loader's
// lock and the allocation a first dlsym takes could deadlock.
[[noreturn]] void exit_process(int status) {
  for (;;) syscall(SYS_exit_group, status);
}

// The footer says "_exit" and the status (for _Exit too: the same end, without exit handlers).
void finish(const char* when, int status) {
  gpumemtrace::finish_trace(when, gpumemtrace::ProcessEnd::exited(gpumemtrace::format::End::QuickExit, status));
}

}  // namespace

extern "C" {

void _exit(int status) {
  finish("at _exit", status);
  exit_process(status);
}

void _Exit(int status) {
  finish("at _Exit", status);
  exit_process(status);
}

}  // extern "C"
