// interpose/hooks/exec.cpp — every exec a program can make through libc. exec replaces the program
// image without running exit handlers, so the trace would lose its last (up to 100 ms of) events: it
// is checkpointed first (drained, written, a footer saying "exec"). The new image inherits LD_PRELOAD
// and starts its own trace. An exec that fails (Python's os.execvp tries each PATH entry in turn) cuts
// the footer off again: the same trace goes on (recorder.h, recorder_before_exec).
//
// glibc's exec* variants call execve internally (not through the PLT), so each is hooked: execve,
// execv, execvp, execvpe, the execl* lists, fexecve (Python's os.execve(fd, ...)) and execveat; and
// syscall(SYS_execve / SYS_execveat, ...) on x86-64. posix_spawn needs nothing: its child runs in the
// parent's memory until its exec, with none of our hooks, and the new image traces itself.
//
// Stack: the execl* lists become an argv on the caller's stack, sized to the list (as glibc's own
// execl does): no fixed array, no limit of ours on the count, and no more stack than glibc takes (a
// thread with a 16 KiB stack, a handler on a small sigaltstack).
#include <alloca.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "interpose/hooks/real_function.h"
#include "interpose/recorder/recorder.h"

namespace {

using ExecPath = int (*)(const char*, char* const[]);
using ExecPathEnv = int (*)(const char*, char* const[], char* const[]);
using ExecFd = int (*)(int, char* const[], char* const[]);
using ExecAt = int (*)(int, const char*, char* const[], char* const[], int);
gpumemtrace::RealFunction<ExecPathEnv> real_execve{"execve", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPath> real_execv{"execv", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPath> real_execvp{"execvp", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPathEnv> real_execvpe{"execvpe", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecFd> real_fexecve{"fexecve", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecAt> real_execveat{"execveat", gpumemtrace::Library::Libc};

// Runs the real exec around the trace hand-over; keeps errno of a failed exec.
template <typename Exec>
long exec_traced(Exec&& exec) {
  gpumemtrace::recorder_before_exec();
  const long rc = exec();
  const int saved_errno = errno;
  gpumemtrace::recorder_exec_failed();
  errno = saved_errno;
  return rc;
}

// The number of arguments of an execl* list after `arg` up to its NULL (which is not counted).
size_t count_args(const char* arg, va_list ap) {
  size_t n = 1;
  va_list count;
  va_copy(count, ap);
  for (const char* a = arg; a; a = va_arg(count, const char*)) ++n;
  va_end(count);
  return n - 1;
}

}  // namespace

// The execl* variants: the argument list becomes an argv (and envp for execle) on this frame's stack,
// then the matching exec*v* hook runs. A macro, because the argv must live in the hook's own frame.
#define GPUMEMTRACE_EXEC_LIST(arg, with_env, call)                                     \
  va_list ap;                                                                          \
  va_start(ap, arg);                                                                   \
  const size_t count = count_args(arg, ap);                                            \
  char** argv = static_cast<char**>(alloca((count + 1) * sizeof(char*)));              \
  argv[0] = const_cast<char*>(arg);                                                    \
  for (size_t i = 1; i <= count; ++i) argv[i] = va_arg(ap, char*);                     \
  char** envp = with_env ? va_arg(ap, char**) : nullptr;                               \
  (void)envp;                                                                          \
  va_end(ap);                                                                          \
  return call

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
  auto real = real_execve();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(path, argv, envp); }));
}

int execv(const char* path, char* const argv[]) {
  auto real = real_execv();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(path, argv); }));
}

int execvp(const char* file, char* const argv[]) {
  auto real = real_execvp();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(file, argv); }));
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  auto real = real_execvpe();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(file, argv, envp); }));
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  auto real = real_fexecve();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(fd, argv, envp); }));
}

int execveat(int dirfd, const char* path, char* const argv[], char* const envp[], int flags) {
  auto real = real_execveat();
  if (!real) return errno = ENOSYS, -1;
  return static_cast<int>(exec_traced([&] { return real(dirfd, path, argv, envp, flags); }));
}

int execl(const char* path, const char* arg, ...) { GPUMEMTRACE_EXEC_LIST(arg, false, execv(path, argv)); }

int execlp(const char* file, const char* arg, ...) { GPUMEMTRACE_EXEC_LIST(arg, false, execvp(file, argv)); }

int execle(const char* path, const char* arg, ...) { GPUMEMTRACE_EXEC_LIST(arg, true, execve(path, argv, envp)); }

}  // extern "C"

#if defined(__x86_64__)
// syscall(): glibc's, instruction for instruction (a leaf: no frame of its own, so that a vfork made
// through it still returns in both processes), except that SYS_execve (59) and SYS_execveat (322) go
// to gpumemtrace_exec_syscall, which checkpoints the trace around them. On entry: rdi the number,
// rsi rdx rcx r8 r9 and 8(%rsp) the six arguments; a failure returns -1 with errno set.
extern "C" {
__attribute__((visibility("hidden"))) long gpumemtrace_exec_syscall(long number, long a1, long a2, long a3, long a4,
                                                                    long a5, long a6);
__attribute__((visibility("hidden"))) long gpumemtrace_syscall_failed(long result);
}

asm(R"(
  .text
  .globl syscall
  .type syscall, @function
syscall:
  .cfi_startproc
  cmpq $59, %rdi
  je gpumemtrace_exec_syscall
  cmpq $322, %rdi
  je gpumemtrace_exec_syscall
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movq %r8, %r10
  movq %r9, %r8
  movq 8(%rsp), %r9
  syscall
  cmpq $-4095, %rax
  jae 1f
  ret
1:
  movq %rax, %rdi
  jmp gpumemtrace_syscall_failed
  .cfi_endproc
  .size syscall, .-syscall
)");

namespace {

long raw_syscall6(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  register long r9 asm("r9") = a6;
  long result;
  asm volatile("syscall"
               : "=a"(result)
               : "a"(number), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return result;
}

}  // namespace

extern "C" long gpumemtrace_syscall_failed(long result) {
  errno = static_cast<int>(-result);
  return -1;
}

extern "C" long gpumemtrace_exec_syscall(long number, long a1, long a2, long a3, long a4, long a5, long a6) {
  return exec_traced([&] {
    const long result = raw_syscall6(number, a1, a2, a3, a4, a5, a6);
    return static_cast<unsigned long>(result) >= static_cast<unsigned long>(-4095L) ? gpumemtrace_syscall_failed(result)
                                                                                   : result;
  });
}
#endif
