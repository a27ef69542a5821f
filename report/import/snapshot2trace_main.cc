// report/import/snapshot2trace_main.cc — `gpumem-snapshot2trace SNAPSHOT OUT.jsonl`: converts a
// PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into a gpumemtrace timeline.
// OUT may be "-" for stdout. Exit status: 0 converted, 2 bad usage or bad input (one line on stderr).
//
// OUT is never the snapshot itself (the same file by st_dev/st_ino, whatever the name or link that
// leads to it: opening it for writing would empty the snapshot before it is read). A regular OUT (or
// a new one) is replaced only when the conversion succeeded: the trace is written to a new file with
// no name beside it, named and renamed over it at the end, so a failed conversion (a bad snapshot, a
// full disk, a signal) leaves OUT as it was and nothing beside it. Any other OUT (a FIFO, a terminal, /dev/null) is written in place and never removed. Every
// write error is reported (exit 2), standard output's included.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>

#include "report/import/snapshot_to_trace.h"
#include "util/terminal_text.h"

namespace {
const char kUsage[] =
    "usage: gpumem-snapshot2trace SNAPSHOT.pickle OUT.jsonl|-\n"
    "Converts a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) into a gpumemtrace\n"
    "trace (docs/trace-format.md, \"PyTorch snapshot import\"). The pickle is read with a restricted\n"
    "reader: only plain data is accepted, anything that could run code is rejected (exit 2).\n";

using gpumemtrace::util::printable;

// One line on stderr, control characters in the names escaped (util/terminal_text.h).
int fail(const std::string& what) {
  std::fprintf(stderr, "gpumem-snapshot2trace: %s\n", printable(what).c_str());
  return 2;
}

// An ostream target that writes to a descriptor and remembers the first error (errno).
class FdSink : public std::streambuf {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  ~FdSink() override { sync(); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    buffer_.append(s, static_cast<size_t>(n));
    if (buffer_.size() >= (1 << 16) && sync() != 0) return 0;
    return n;
  }
  int sync() override {
    const char* data = buffer_.data();
    size_t left = buffer_.size();
    while (left && !error_) {
      const ssize_t n = ::write(fd_, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = n < 0 ? errno : EIO;
        break;
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    buffer_.clear();
    return error_ ? -1 : 0;
  }

 private:
  int fd_;
  int error_ = 0;
  std::string buffer_;
};

// Where the trace goes: stdout, OUT itself (not a regular file), or a new file renamed over OUT.
struct Output {
  int fd = -1;
  std::string name;       // for messages
  std::string temporary;  // the new file to rename over `target` ("" when written in place or unnamed)
  bool unnamed = false;   // `fd` is a file with no name yet (O_TMPFILE) to put at `target`
  std::string target;
};

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// Opens OUT (see the file comment). Returns 0, or the exit status after saying why.
int open_output(const std::string& in, const std::string& out_path, Output* out) {
  out->name = out_path == "-" ? "standard output" : out_path;
  struct stat in_st, out_st;
  const bool in_known = ::stat(in.c_str(), &in_st) == 0;
  if (out_path == "-") {
    if (in_known && ::fstat(STDOUT_FILENO, &out_st) == 0 && same_file(in_st, out_st)) {
      return fail(out->name + " is the snapshot " + in + ": it would be emptied before it is read");
    }
    out->fd = STDOUT_FILENO;
    return 0;
  }
  if (::stat(out_path.c_str(), &out_st) == 0) {
    if (in_known && same_file(in_st, out_st)) {
      return fail(out_path + " is the snapshot " + in + ": it would be emptied before it is read");
    }
    if (!S_ISREG(out_st.st_mode)) {
      // A FIFO, a terminal, a device: written in place. O_NONBLOCK only to open (a FIFO without a
      // reader is an error, not a wait), then blocking writes.
      out->fd = ::open(out_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
      if (out->fd < 0) return fail(out_path + ": cannot open: " + std::strerror(errno));
      ::fcntl(out->fd, F_SETFL, ::fcntl(out->fd, F_GETFL) & ~O_NONBLOCK);
      return 0;
    }
  }
  // A regular file, or none yet: the new trace goes beside it (the same file system, so rename is
  // atomic), through the link when OUT is one. It has no name until the conversion succeeded
  // (O_TMPFILE, given one by commit()), so a conversion killed on the way leaves nothing behind; where
  // the file system has no O_TMPFILE, a name made now.
  char resolved[PATH_MAX];
  out->target = ::realpath(out_path.c_str(), resolved) ? std::string(resolved) : out_path;
  const size_t slash = out->target.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out->target.substr(0, slash);
  out->fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (out->fd < 0) {
    out->temporary = out->target + ".tmp-XXXXXX";
    out->fd = ::mkostemp(out->temporary.data(), O_CLOEXEC);
  } else {
    out->unnamed = true;
  }
  if (out->fd < 0) return fail(out_path + ": cannot create: " + std::strerror(errno));
  // A trace is private (0600, docs/security.md); a file it replaces keeps its mode.
  struct stat existing;
  if (::stat(out->target.c_str(), &existing) == 0) ::fchmod(out->fd, existing.st_mode & 07777);
  return 0;
}

void discard(Output& out) {
  if (out.unnamed) ::close(out.fd);
  if (out.temporary.empty()) return;
  ::close(out.fd);
  ::unlink(out.temporary.c_str());
}

// Puts the converted trace at OUT: names the unnamed file (beside OUT), closes it and renames it over
// OUT. Returns 0, or the exit status after saying why (nothing is left beside OUT).
int commit(Output& out) {
  if (out.unnamed) {
    const std::string fd_path = "/proc/self/fd/" + std::to_string(out.fd);
    for (int attempt = 0; out.temporary.empty(); ++attempt) {
      const std::string name = out.target + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(attempt);
      if (::linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        out.temporary = name;
      } else if (errno != EEXIST || attempt == 100) {
        const int error = errno;
        ::close(out.fd);
        return fail(out.name + ": cannot create: " + std::strerror(error));
      }
    }
  }
  if (::close(out.fd) != 0) {
    const int error = errno;
    ::unlink(out.temporary.c_str());
    return fail(out.name + ": cannot write: " + std::strerror(error));
  }
  if (::rename(out.temporary.c_str(), out.target.c_str()) != 0) {
    const int error = errno;
    ::unlink(out.temporary.c_str());
    return fail(out.name + ": cannot replace: " + std::strerror(error));
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    fputs(kUsage, stdout);
    return 0;
  }
  if (argc != 3) return fail("expected SNAPSHOT and OUT (see --help)");
  const std::string in = argv[1], out_path = argv[2];
  Output output;
  if (int status = open_output(in, out_path, &output)) return status;
  gpumemtrace::snapshot::ConvertStats stats;
  {
    FdSink sink(output.fd);
    std::ostream out(&sink);
    try {
      gpumemtrace::snapshot::snapshot_to_trace(in, out, &stats);
    } catch (const gpumemtrace::snapshot::SnapshotError& error) {
      discard(output);
      // The converter stops at a failed write: the output's error, not the snapshot's.
      if (sink.error()) return fail(output.name + ": cannot write: " + std::strerror(sink.error()));
      return fail(in + ": " + error.message());
    }
    out.flush();
    if (sink.error() || !out) {
      const int error = sink.error() ? sink.error() : EIO;
      discard(output);
      return fail(output.name + ": cannot write: " + std::strerror(error));
    }
  }
  if (output.unnamed || !output.temporary.empty()) {
    if (int status = commit(output)) return status;
  } else if (output.fd != STDOUT_FILENO && ::close(output.fd) != 0) {
    return fail(output.name + ": cannot write: " + std::strerror(errno));
  }
  for (const auto& w : stats.warnings) fail(in + ": warning: " + w);
  std::fprintf(stderr,
               "gpumem-snapshot2trace: %s: %llu segments, %llu history entries -> %llu events "
               "(%llu initial segments, %llu initial blocks, %llu entries ignored, %llu inconsistencies)\n",
               printable(in).c_str(), (unsigned long long)stats.segments, (unsigned long long)stats.trace_entries,
               (unsigned long long)stats.events, (unsigned long long)stats.initial_segments,
               (unsigned long long)stats.initial_blocks, (unsigned long long)stats.ignored_entries,
               (unsigned long long)stats.inconsistencies);
  return 0;
}
