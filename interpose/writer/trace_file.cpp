// interpose/writer/trace_file.cpp — safe creation of the trace file and the checks on its descriptor.
#include "interpose/writer/trace_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "interpose/recorder/recorder.h"
#include "interpose/writer/private_fds.h"

namespace gpumemtrace {
namespace {

constexpr int kMaxNames = 100;      // numbered names tried before giving up
constexpr int kOpenWaitMs = 2000;   // how long a named FIFO may go without a reader at start-up

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

bool owned_by_us_or_root(const struct stat& st) { return st.st_uid == geteuid() || st.st_uid == 0; }

const char* kind_of(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "a file of another user";
}

// Why `taken` cannot be ours, for the start-up line; empty for an earlier trace of ours (the same
// name comes back after exec or with pid reuse: not worth a word).
std::string why_taken(const std::string& taken) {
  struct stat st;
  if (lstat(taken.c_str(), &st) != 0) return "";
  if (S_ISREG(st.st_mode) && st.st_uid == geteuid()) return "";
  return taken + " is " + kind_of(st) + "; not used";
}

// The program's own descriptor 1 or 2 refers to `st` (GPUMEMTRACE_OUTPUT=/dev/stdout with stdout
// redirected to a file).
bool is_program_stdout_or_stderr(const struct stat& st, const ProgramStreams& streams) {
  for (const ProgramStreams::Id& id : {streams.out, streams.err})
    if (id.open && id.dev == st.st_dev && id.ino == st.st_ino) return true;
  return false;
}

enum class Named { Opened, TakeAnotherName, Failed };

// The user named `path` literally and it exists. A FIFO, device or socket (or the program's stdout
// file) is opened without blocking; a regular file is never overwritten; anything belonging to another
// user, or a dangling symlink, is not used.
Named open_named_existing(const std::string& path, const ProgramStreams& streams, int* fd, bool* nonblock,
                          std::string* note, std::string* error) {
  struct stat link, target;
  if (lstat(path.c_str(), &link) != 0 || stat(path.c_str(), &target) != 0) {
    *note = path + " is a dangling symbolic link; not used";
    return Named::TakeAnotherName;
  }
  if (S_ISDIR(target.st_mode)) {
    *error = "cannot open " + path + ": it is a directory (end the name with / for a trace in it)";
    return Named::Failed;
  }
  if (!owned_by_us_or_root(link) || !owned_by_us_or_root(target)) {
    *note = path + " belongs to another user; not used";
    return Named::TakeAnotherName;
  }
  int flags = O_WRONLY | O_CLOEXEC | O_NOCTTY;
  if (S_ISREG(target.st_mode)) {
    if (!is_program_stdout_or_stderr(target, streams)) {  // an earlier trace: never overwritten
      *note = why_taken(path);
      return Named::TakeAnotherName;
    }
    flags |= O_APPEND;
  } else {
    flags |= O_NONBLOCK;  // a FIFO with a stalled reader must never block the program
    *nonblock = true;
  }
  for (int waited_ms = 0;; waited_ms += 10) {
    *fd = ::open(path.c_str(), flags);
    if (*fd >= 0) break;
    // A FIFO without a reader refuses a non-blocking writer (ENXIO): wait for one, a bounded time.
    if (errno != ENXIO || !S_ISFIFO(target.st_mode) || waited_ms >= kOpenWaitMs) {
      *error = errno == ENXIO ? "no reader on the FIFO " + path + " after " + std::to_string(kOpenWaitMs / 1000) + " s"
                              : "cannot open " + path + ": " + strerror(errno);
      return Named::Failed;
    }
    timespec pause{0, 10 * 1000000L};
    nanosleep(&pause, nullptr);
  }
  struct stat opened;
  if (fstat(*fd, &opened) != 0 || !same_file(opened, target)) {  // swapped between stat and open
    ::close(*fd);
    *error = "cannot open " + path + ": it changed while being opened";
    return Named::Failed;
  }
  return Named::Opened;
}

}  // namespace

std::string numbered_path(const std::string& path, int n) { return tagged_path(path, "-" + std::to_string(n)); }

std::string tagged_path(const std::string& path, const std::string& tag) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t at = path.find(".jsonl", base);
  // A name with ".zst" but no ".jsonl" (out/x.%p.zst) keeps ".zst" last: still compressed, still read.
  if (at == std::string::npos && path.size() > base + 4 && path.compare(path.size() - 4, 4, ".zst") == 0)
    at = path.size() - 4;
  if (at == std::string::npos) at = path.size();
  return path.substr(0, at) + tag + path.substr(at);
}

ProgramStreams ProgramStreams::of_calling_thread() {
  ProgramStreams streams;
  struct stat st;
  for (auto [fd, id] : {std::pair{STDOUT_FILENO, &streams.out}, std::pair{STDERR_FILENO, &streams.err}})
    if (fstat(fd, &st) == 0) *id = Id{true, st.st_dev, st.st_ino};
  return streams;
}

bool open_trace_file(const std::string& path, bool named, TraceFile* file, std::string* note,
                     std::string* error, const ProgramStreams* streams) {
  const ProgramStreams own_streams = streams ? ProgramStreams{} : ProgramStreams::of_calling_thread();
  if (!streams) streams = &own_streams;
  for (int attempt = 0; attempt < kMaxNames; ++attempt) {
    const std::string candidate = attempt ? numbered_path(path, attempt) : path;
    bool nonblock = false;
    // O_EXCL|O_NOFOLLOW: a new regular file or nothing; a symlink or FIFO at the name is never
    // followed or opened. 0600: a trace shows the program's command line, paths and stacks.
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0 && errno != EEXIST) {
      *error = "cannot open " + candidate + ": " + strerror(errno);
      return false;
    }
    const bool created = fd >= 0;  // a new file of ours (not a FIFO or stream the user named)
    if (fd < 0 && attempt == 0 && named) {
      const Named r = open_named_existing(candidate, *streams, &fd, &nonblock, note, error);
      if (r == Named::Failed) return false;
    } else if (fd < 0 && note->empty()) {
      *note = why_taken(candidate);
    }
    if (fd < 0) continue;
    struct stat st;
    fd = move_fd_high(fd);
    if (fstat(fd, &st) != 0) {
      *error = "cannot open " + candidate + ": " + strerror(errno);
      ::close(fd);
      if (created) ::unlink(candidate.c_str());  // the empty file just made: nothing is left behind
      return false;
    }
    file->created_ = created;
    file->path_ = candidate;
    file->fd_ = fd;
    file->dev_ = st.st_dev;
    file->ino_ = st.st_ino;
    file->named_ = named && attempt == 0;
    file->nonblock_ = nonblock;
    return true;
  }
  *error = "cannot open " + path + ": " + std::to_string(kMaxNames) + " names with its stem are taken";
  return false;
}

bool TraceFile::still_ours() const {
  struct stat st;
  return fd_ >= 0 && fstat(fd_, &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

bool TraceFile::reopen() {
  const int lost = fd_;
  fd_ = -1;  // that number is the program's now (or free): never written to or closed by us again
  // Only the same file (device and inode) is taken back; a path the user named may be a symlink
  // (/dev/stdout), any other is not followed.
  const int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | (named_ ? 0 : O_NOFOLLOW) |
                    (nonblock_ ? O_NONBLOCK : 0);
  const int fd = ::open(path_.c_str(), flags);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) {
    ::close(fd);
    return false;
  }
  fd_ = move_fd_high(fd);
  log_line(("the program closed or reused the trace's file descriptor " + std::to_string(lost) + "; reopened " +
            path_ + " and appending")
               .c_str());
  return true;
}

bool TraceFile::write_all(const char* data, size_t size, std::string* error) {
  if (!still_ours() && !reopen()) {
    *error = "the program closed or reused the trace's file descriptor, and " + path_ +
             " is no longer the trace file";
    return false;
  }
  int stalled_ms = 0;
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n > 0) {
      written_ += static_cast<uint64_t>(n);
      data += n;
      size -= static_cast<size_t>(n);
      stalled_ms = 0;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;  // a signal must not cut the trace short
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && stalled_ms < kStallMs) {
      pollfd p{fd_, POLLOUT, 0};
      poll(&p, 1, 100);
      stalled_ms += 100;
      continue;
    }
    *error = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK
                 ? std::string(strerror(errno))
                 : "the reader of " + path_ + " stopped reading for " + std::to_string(kStallMs / 1000) + " s";
    return false;
  }
  return true;
}

bool TraceFile::can_cut_back() const {
  struct stat st;
  return created_ && still_ours() && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
}

int TraceFile::open_for_reading() const {
  if (!can_cut_back()) return -1;
  const std::string self = "/proc/self/task/" + std::to_string(syscall(SYS_gettid)) + "/fd/" + std::to_string(fd_);
  const int fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool TraceFile::cut_back_to(uint64_t size, bool* removed) {
  *removed = false;
  if (!can_cut_back()) return false;
  if (size == 0) {
    // Only when the name still is this file: another may have taken it since.
    struct stat at_path;
    if (lstat(path_.c_str(), &at_path) == 0 && at_path.st_dev == dev_ && at_path.st_ino == ino_ &&
        ::unlink(path_.c_str()) == 0) {
      *removed = true;
      return true;
    }
  }
  // Shrinking is allowed whatever RLIMIT_FSIZE says; the next write lands at `size`, not past it.
  if (ftruncate(fd_, static_cast<off_t>(size)) != 0 || lseek(fd_, static_cast<off_t>(size), SEEK_SET) < 0)
    return false;
  written_ = size;
  return true;
}

bool TraceFile::rename_to(const std::string& to) {
  struct stat at_path;
  if (!still_ours() || lstat(path_.c_str(), &at_path) != 0 || at_path.st_dev != dev_ || at_path.st_ino != ino_ ||
      ::rename(path_.c_str(), to.c_str()) != 0)
    return false;
  path_ = to;
  return true;
}

void TraceFile::sync() {
  struct stat st;
  if (still_ours() && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) (void)fdatasync(fd_);
}

void TraceFile::close_if_ours() {
  if (still_ours()) ::close(fd_);
  fd_ = -1;
}

}  // namespace gpumemtrace
