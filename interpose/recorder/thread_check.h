// interpose/recorder/thread_check.h — whether this process may start the writer thread at all.
//
// The writer thread is started on the program's first CUDA memory call, which may come after the
// program installed a seccomp filter (a sandbox, a container runtime's profile, a test harness). A new
// thread needs system calls such a filter may refuse, and glibc does not survive every refusal:
//  - rseq: glibc 2.35 and later register each new thread's rseq area when the creating thread's
//    registration succeeded, and abort the whole process when that fails ("Fatal glibc error: rseq
//    registration failed", nptl/pthread_create.c, start_thread);
//  - futex: every lock the writer shares with the program's threads waits on it.
// So, when the process runs under a filter (prctl PR_GET_SECCOMP), both calls are tried first in a
// child made with clone(CLONE_VM | CLONE_VFORK) on a stack of its own, with no exit signal: whatever
// the filter does (an error, SIGSYS, a kill), only the child meets it, the program gets no SIGCHLD, and
// no atfork handler runs. A refusal makes the recorder a pass-through, with one line saying why.
//
// Cost: one prctl per process start; the child only under a filter.
// Thread-safety: called once, from the recorder's start-up (the only caller at a time).
#pragma once

#include <string>

namespace gpumemtrace {

// "" when the writer thread can be started; otherwise why not ("a seccomp filter refuses rseq, ...").
std::string thread_start_refusal();

}  // namespace gpumemtrace
