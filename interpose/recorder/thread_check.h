// interpose/recorder/thread_check.h — whether this process may start the writer thread at all, and
// which system calls of the recorder's a seccomp filter would kill it for.
//
// The writer thread is started on the program's first CUDA memory call, which may come after the
// program installed a seccomp filter (a sandbox, a container runtime's profile, a test harness). A
// filter may refuse (an error) or answer with death (SIGSYS, a kill) system calls the program itself
// never makes, but the recorder does: a new thread's (clone3, or clone where clone3 answers ENOSYS;
// rseq, set_robust_list, futex...), the writer's (openat, write, ftruncate, unshare, close_range...),
// the unwinder's (mincore at libunwind's start-up, process_vm_readv for the memory it reads) and the
// hooks' (tgkill, ioctl...). And glibc does not survive every refusal:
//  - rseq: glibc 2.35 and later register each new thread's rseq area when the creating thread's
//    registration succeeded, and abort the whole process when that fails ("Fatal glibc error: rseq
//    registration failed", nptl/pthread_create.c, start_thread);
//  - futex: every lock the writer shares with the program's threads waits on it.
// So, when the process runs under a filter (prctl PR_GET_SECCOMP), every one of those calls is made
// first in a child that shares the program's memory (vfork, where its SIGCHLD goes unnoticed, so that
// a filter that kills clone meets the child only; else clone(CLONE_VM | CLONE_VFORK) with no exit
// signal), with arguments for which the kernel changes nothing: whatever the filter does, only the
// child meets it, and no atfork handler runs. Then:
//  - a call that kills, or a refused rseq or futex: the recorder is a pass-through, with one line
//    saying which call;
//  - process_vm_readv or mincore kills: the page checks do without it (program_strings.h); without
//    mincore libunwind cannot start, and events carry no native stacks (one line).
// Other refusals are errors the recorder handles where it makes the call.
// A filter installed after the recorder started is not probed.
//
// Cost: one prctl per process start; the child only under a filter.
// Thread-safety: called once, from the recorder's start-up (the only caller at a time).
#pragma once

#include <string>

namespace gpumemtrace {

// "" when the writer thread can be started; otherwise why not ("a seccomp filter refuses rseq, ...").
std::string thread_start_refusal();

// After thread_start_refusal(): true when libunwind's start-up would get the process killed (mincore).
bool unwinder_would_be_killed();

}  // namespace gpumemtrace
