// interpose/writer/private_fds.cpp — see private_fds.h.
//
// Raw system calls throughout: these descriptors belong to the writer's table only, and a libc
// wrapper a sanitizer intercepts (ThreadSanitizer tracks descriptors by number, process-wide) would
// take closing the copy of 1 for closing the program's stdout.
#include "interpose/writer/private_fds.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#ifndef SYS_close_range
#define SYS_close_range 436  // Linux 5.9; the same number on every architecture
#endif
#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1u << 1)
#endif

namespace gpumemtrace {
namespace {

long sys_close(int fd) { return syscall(SYS_close, fd); }

// Fallback for kernels without close_range: the fd directory of this thread (its table, not the
// process leader's), read until nothing but the directory's own descriptor is left (closing while
// reading may skip entries: read again). Without /proc: every number below the descriptor limit.
void close_every_descriptor() {
  struct LinuxDirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[];
  };
  for (;;) {
    const int dir = static_cast<int>(
        syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir < 0) {
      rlimit rl;
      const long limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 20) ? rl.rlim_cur : 1 << 20;
      for (long fd = 0; fd < limit; ++fd) sys_close(static_cast<int>(fd));
      return;
    }
    bool closed_any = false;
    alignas(8) char buf[4096];
    for (long n; (n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0;) {
      for (long at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const LinuxDirent64*>(buf + at);
        at += entry->reclen;
        int fd = 0;
        const char* p = entry->name;
        for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
        if (p == entry->name || *p != '\0' || fd == dir) continue;  // ".", ".."
        sys_close(fd);
        closed_any = true;
      }
    }
    sys_close(dir);
    if (!closed_any) return;
  }
}

// The first number the writer's own files get: 1000, or half the descriptor limit when that is lower
// (the other half stays free for the writer: libdwfl keeps one open per module it symbolizes).
int first_writer_descriptor() {
  constexpr long kFirst = 1000;
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 >= kFirst) return kFirst;
  return static_cast<int>(rl.rlim_cur / 2 > 3 ? rl.rlim_cur / 2 : 3);
}

// Every number below first_writer_descriptor() on /dev/null: the writer's files (opened on the lowest
// free number, as always) land on numbers the program seldom uses, so code that follows descriptors
// by number for the whole process (ThreadSanitizer, a preloaded shim that wraps close) does not take
// the writer's opens and closes for the program's; and 0, 1, 2 are never one of the writer's files.
void fill_low_descriptors() {
  const int null_fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC));
  if (null_fd < 0) return;
  const int first = first_writer_descriptor();
  for (int fd = 0; fd < first; ++fd)
    if (fd != null_fd && syscall(SYS_dup3, null_fd, fd, O_CLOEXEC) < 0) break;
  if (null_fd >= first) sys_close(null_fd);
}

}  // namespace

FdTable make_private_fd_table() noexcept {
  const int saved_errno = errno;
  // close_range(CLOSE_RANGE_UNSHARE) unshares and closes in one step: the private table never holds a
  // copy of the program's descriptors, not even for a moment. It is a system call of its own, so a
  // seccomp profile that refuses unshare (Docker's default does, to unprivileged containers) may
  // still allow it.
  if (syscall(SYS_close_range, 0u, ~0u, CLOSE_RANGE_UNSHARE) != 0) {
    if (syscall(SYS_unshare, CLONE_FILES) != 0) {
      errno = saved_errno;
      return FdTable::Shared;
    }
    if (syscall(SYS_close_range, 0u, ~0u, 0u) != 0) close_every_descriptor();
  }
  fill_low_descriptors();
  errno = saved_errno;
  return FdTable::Private;
}

}  // namespace gpumemtrace
