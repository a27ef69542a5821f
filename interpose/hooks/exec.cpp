// interpose/hooks/exec.cpp — the exec family. exec replaces the program image without running exit
// handlers, so the trace would lose its last (up to 100 ms of) events: finish it first. The new image
// inherits LD_PRELOAD and starts its own trace. glibc's exec* variants call execve internally (not
// through the PLT), so each is hooked.
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

#include "interpose/hooks/real_function.h"
#include "interpose/recorder/recorder.h"

namespace {

using ExecPath = int (*)(const char*, char* const[]);
using ExecPathEnv = int (*)(const char*, char* const[], char* const[]);
gpumemtrace::RealFunction<ExecPathEnv> real_execve{"execve", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPath> real_execv{"execv", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPath> real_execvp{"execvp", gpumemtrace::Library::Libc};
gpumemtrace::RealFunction<ExecPathEnv> real_execvpe{"execvpe", gpumemtrace::Library::Libc};

// Runs the real exec around the trace hand-over; keeps errno of a failed exec.
template <typename Exec>
int exec_traced(Exec&& exec) {
  gpumemtrace::recorder_before_exec();
  const int rc = exec();
  const int saved_errno = errno;
  gpumemtrace::recorder_exec_failed();
  errno = saved_errno;
  return rc;
}

constexpr int kMaxListArgs = 4096;

// Collects the NULL-terminated variadic argument list of execl* into argv (and envp for execle).
// Returns false when there are more than kMaxListArgs arguments (then exec fails with E2BIG).
bool collect_args(const char* arg, va_list ap, char** argv, char*** envp) {
  int n = 0;
  argv[n++] = const_cast<char*>(arg);
  while (arg) {
    arg = va_arg(ap, const char*);
    if (n == kMaxListArgs) return false;
    argv[n++] = const_cast<char*>(arg);
  }
  if (envp) *envp = va_arg(ap, char**);
  return true;
}

// The execl* variants: the argument list becomes an argv (and envp for execle), then `exec` runs the
// matching exec*v* hook above.
template <typename Exec>
int exec_list(const char* arg, va_list ap, bool with_env, Exec&& exec) {
  char* argv[kMaxListArgs];
  char** envp = nullptr;
  if (!collect_args(arg, ap, argv, with_env ? &envp : nullptr)) return errno = E2BIG, -1;
  return exec(argv, envp);
}

}  // namespace

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
  auto real = real_execve();
  if (!real) return errno = ENOSYS, -1;
  return exec_traced([&] { return real(path, argv, envp); });
}

int execv(const char* path, char* const argv[]) {
  auto real = real_execv();
  if (!real) return errno = ENOSYS, -1;
  return exec_traced([&] { return real(path, argv); });
}

int execvp(const char* file, char* const argv[]) {
  auto real = real_execvp();
  if (!real) return errno = ENOSYS, -1;
  return exec_traced([&] { return real(file, argv); });
}

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  auto real = real_execvpe();
  if (!real) return errno = ENOSYS, -1;
  return exec_traced([&] { return real(file, argv, envp); });
}

int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const int rc = exec_list(arg, ap, false, [&](char** argv, char**) { return execv(path, argv); });
  va_end(ap);
  return rc;
}

int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const int rc = exec_list(arg, ap, false, [&](char** argv, char**) { return execvp(file, argv); });
  va_end(ap);
  return rc;
}

int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  const int rc = exec_list(arg, ap, true, [&](char** argv, char** envp) { return execve(path, argv, envp); });
  va_end(ap);
  return rc;
}

}  // extern "C"
