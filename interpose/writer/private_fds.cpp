// interpose/writer/private_fds.cpp — see private_fds.h.
//
// Raw system calls while the private table is made: those descriptors belong to the writer's table
// only, and a libc wrapper a sanitizer intercepts (ThreadSanitizer tracks descriptors by number,
// process-wide) would take closing the copy of 1 for closing the program's stdout. move_fd_high uses
// libc, as the code that opened the descriptor did.
#include "interpose/writer/private_fds.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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

rlim_t descriptor_limit() {
  rlimit rl;
  return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : RLIM_INFINITY;
}

// The first number of the writer's range in its private table, on this thread; 0: the calling thread
// has no private table (a program thread, or a writer that shares the program's table). Set once, by
// the writer thread, before it opens anything: the range its /dev/null fill was made for.
__thread int t_private_table_first __attribute__((tls_model("initial-exec"))) = 0;

// Every number below `first` on /dev/null: the writer's files (opened on the lowest free number, as
// always) land from `first` up, in the range kept for them; and 0, 1, 2 are never one of its files.
void fill_low_descriptors(int first) {
  const int null_fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_CLOEXEC));
  if (null_fd < 0) return;
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
  const int first = own_descriptor_ranges(descriptor_limit()).writer_table;
  fill_low_descriptors(first);
  t_private_table_first = first;
  errno = saved_errno;
  return FdTable::Private;
}

OwnDescriptorRanges own_descriptor_ranges(rlim_t limit) noexcept {
  constexpr long kProgramTableFirst = 1000;
  constexpr long kTopHeadroom = 16;  // below the limit, when that is under kProgramTableFirst + this
  long program_table = kProgramTableFirst;
  if (limit != RLIM_INFINITY && limit < static_cast<rlim_t>(kProgramTableFirst + kTopHeadroom))
    program_table = std::max(3L, static_cast<long>(limit) - kTopHeadroom);
  return {static_cast<int>(program_table), static_cast<int>(std::max(3L, program_table / 2))};
}

int move_fd_high(int fd) noexcept {
  if (fd < 0) return fd;
  const int saved_errno = errno;
  const int lowest = t_private_table_first ? t_private_table_first
                                           : own_descriptor_ranges(descriptor_limit()).program_table;
  int out = fd;
  if (fd < lowest) {
    const int high = fcntl(fd, F_DUPFD_CLOEXEC, lowest);
    if (high >= 0) {
      ::close(fd);
      out = high;
    }
  }
  fcntl(out, F_SETFD, FD_CLOEXEC);
  errno = saved_errno;
  return out;
}

}  // namespace gpumemtrace
