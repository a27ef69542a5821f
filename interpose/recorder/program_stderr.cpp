// interpose/recorder/program_stderr.cpp — see program_stderr.h.
#include "interpose/recorder/program_stderr.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace gpumemtrace {
namespace {

struct StderrId {
  // kUnknown: fstat refused at load (a seccomp filter). kNotYet: before the library's constructor ran
  // (another constructor of ours that says something at load notes it first).
  enum : int { kNotYet, kClosed, kKnown, kUnknown };
  std::atomic<int> state{kNotYet};
  dev_t dev = 0;
  ino_t ino = 0;
};
StderrId g_stderr;

// Runs when the library is loaded: no ordering needs (one system call, no other state).
__attribute__((constructor)) void note_stderr_at_load() {
  if (g_stderr.state.load(std::memory_order_acquire) == StderrId::kNotYet) remember_program_stderr();
}

// True when `text` (of `size` bytes) holds `needle`.
bool holds(const char* text, size_t size, const char* needle, size_t needle_size) {
  if (needle_size == 0 || size < needle_size) return false;
  for (size_t i = 0; i + needle_size <= size; ++i)
    if (text[i] == needle[0] && std::memcmp(text + i, needle, needle_size) == 0) return true;
  return false;
}

// True when the parent process has a library of this library's file name mapped: it runs under the
// recorder too. False when that cannot be read (another user's process, no /proc).
bool parent_is_traced() {
  Dl_info self;
  if (!dladdr(reinterpret_cast<void*>(&remember_program_stderr), &self) || !self.dli_fname) return false;
  const char* slash = std::strrchr(self.dli_fname, '/');
  const char* name = slash ? slash + 1 : self.dli_fname;
  char needle[256];  // "/libgpumemtrace.so": how the parent's maps name the same library
  const size_t needle_size = std::strlen(name) + 1;
  if (needle_size >= sizeof needle) return false;
  needle[0] = '/';
  std::memcpy(needle + 1, name, needle_size);
  char path[64] = "/proc/";
  char digits[24];
  int d = 0;
  for (long ppid = getppid(); ppid > 0; ppid /= 10) digits[d++] = static_cast<char>('0' + ppid % 10);
  size_t at = std::strlen(path);
  while (d > 0) path[at++] = digits[--d];
  std::memcpy(path + at, "/maps", 6);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // Chunks that overlap by the needle's length: a name split between two reads is still found.
  char buf[8192];
  size_t kept = 0;
  bool found = false;
  for (ssize_t n; !found && (n = read(fd, buf + kept, sizeof buf - kept)) > 0;) {
    const size_t size = kept + static_cast<size_t>(n);
    found = holds(buf, size, needle, needle_size);
    kept = size < needle_size ? size : needle_size;
    std::memmove(buf, buf + size - kept, kept);
  }
  close(fd);
  return found;
}

}  // namespace

void remember_program_stderr() noexcept {
  const int saved_errno = errno;
  struct stat st;
  if (fstat(STDERR_FILENO, &st) == 0) {
    g_stderr.dev = st.st_dev;
    g_stderr.ino = st.st_ino;
    g_stderr.state.store(StderrId::kKnown, std::memory_order_release);
  } else {
    g_stderr.state.store(errno == EBADF ? StderrId::kClosed : StderrId::kUnknown, std::memory_order_release);
  }
  errno = saved_errno;
}

bool stderr_is_the_programs() noexcept {
  if (g_stderr.state.load(std::memory_order_acquire) == StderrId::kNotYet) remember_program_stderr();
  const int state = g_stderr.state.load(std::memory_order_acquire);
  if (state == StderrId::kClosed) return false;
  const int saved_errno = errno;
  struct stat st;
  bool same;
  if (fstat(STDERR_FILENO, &st) == 0)
    same = state == StderrId::kUnknown || (st.st_dev == g_stderr.dev && st.st_ino == g_stderr.ino);
  else  // closed; or fstat refused (a seccomp filter): open, and nothing tells it is another file
    same = errno != EBADF;
  errno = saved_errno;
  return same;
}

bool says_where_its_trace_goes(Verbosity verbose) noexcept {
  if (verbose != Verbosity::Auto) return verbose == Verbosity::On;
  const int saved_errno = errno;
  termios t;
  const bool terminal = stderr_is_the_programs() && tcgetattr(STDERR_FILENO, &t) == 0;
  const bool says = terminal && !parent_is_traced();
  errno = saved_errno;
  return says;
}

}  // namespace gpumemtrace
