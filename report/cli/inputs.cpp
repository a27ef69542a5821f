// report/cli/inputs.cpp — TRACE arguments: files, directories and streams (see inputs.h).
#include "report/cli/inputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "report/import/pickle_reader.h"
#include "report/reader/byte_source.h"
#include "report/reader/records.h"
#include "report/reader/trace_reader.h"
#include "util/terminal_text.h"

namespace gpumemtrace::report {

namespace {

const char kStdinName[] = "-";

std::string error_text(int error) { return std::strerror(error); }

// Writes all of `size` bytes; false on an error (errno says which).
bool write_all(int fd, const char* data, size_t size) {
  while (size) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A file with no name in $TMPDIR (else /tmp), readable by its owner only: it disappears with its
// last descriptor, however the process ends (a signal during the copy included). O_TMPFILE where the
// file system has it, else a name removed at once. Throws std::runtime_error naming `name`.
int anonymous_file(const std::string& name) {
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env && *env ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string path = dir + "/gpumem-report-stream-XXXXXX";
  fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error(name + ": cannot create a temporary copy in " + util::printable(dir) + ": " + error_text(errno));
  }
  ::unlink(path.c_str());
  return fd;
}

// Reads a stream and writes every byte it hands out to the copy, as it goes: the reader's limits
// (a line, bytes without a record, the zstd window, what a trace may define) stop a stream that is
// not a trace before the copy grows past them. `head`: bytes already read from the stream.
class CopyingSource : public ByteSource {
 public:
  CopyingSource(int in, int copy, std::string head) : in_(in), copy_(copy), head_(std::move(head)) {}

  size_t read(char* out, size_t capacity) override {
    size_t n = 0;
    if (!head_.empty()) {
      n = std::min(capacity, head_.size());
      std::memcpy(out, head_.data(), n);
      head_.erase(0, n);
    } else {
      ssize_t got;
      do got = ::read(in_, out, capacity);
      while (got < 0 && errno == EINTR);
      if (got < 0) throw std::runtime_error("cannot read: " + error_text(errno));
      n = static_cast<size_t>(got);
    }
    if (n && !write_all(copy_, out, n)) {
      throw std::runtime_error("cannot write its temporary copy: " + error_text(errno));
    }
    copied_ += n;
    if (copied_ > limit_) {
      throw std::runtime_error("more than " + std::to_string(limit_ >> 30) + " GiB (the limit of a copied stream)");
    }
    return n;
  }
  void set_limit(uint64_t limit) { limit_ = limit; }

 private:
  int in_;
  int copy_;
  std::string head_;
  uint64_t copied_ = 0;
  uint64_t limit_ = UINT64_MAX;
};

// Copies the stream `in` to its end into an anonymous file and returns that file's descriptor. A
// trace (zstd or text) is read through the reader on the way (without analysis), so that one that is
// not a trace is refused at the line where the reader would refuse it, with the copy at most that far;
// a PyTorch snapshot, which only the snapshot reader can judge, is copied up to its size limit.
// Throws TraceError / std::runtime_error naming `name`.
int copy_stream(int in, const std::string& name) {
  // The first bytes tell what the stream holds: read until there are 4 or the stream ends.
  std::string head(4, '\0');
  size_t filled = 0;
  while (filled < head.size()) {
    ssize_t n = ::read(in, head.data() + filled, head.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(name + ": cannot read: " + error_text(errno));
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  head.resize(filled);
  const int copy = anonymous_file(name);
  try {
    auto source = std::make_unique<CopyingSource>(in, copy, head);
    CopyingSource& copying = *source;
    if (pickle::looks_like_pickle_bytes(head)) {
      copying.set_limit(pickle::Limits{}.max_input_bytes);
      std::vector<char> buffer(1 << 20);
      try {
        while (copying.read(buffer.data(), buffer.size()) != 0) {
        }
      } catch (const std::runtime_error& error) {
        throw TraceError(name, 0, error.what());
      }
    } else {
      std::unique_ptr<ByteSource> trace = std::move(source);
      if (starts_like_zstd(head)) trace = zstd_byte_source(std::move(trace));
      SymbolTable symbols;
      TraceHandler nothing;
      read_trace(*trace, name, symbols, nothing);
      // The reader stops at a cut-short last line: the rest of the stream is copied as it is.
      char rest[1 << 16];
      try {
        while (copying.read(rest, sizeof rest) != 0) {
        }
      } catch (const std::runtime_error& error) {
        throw TraceError(name, 0, error.what());
      }
    }
  } catch (...) {
    ::close(copy);
    throw;
  }
  return copy;
}

}  // namespace

bool is_stream_input(const std::string& arg) {
  if (arg == kStdinName) return true;
  struct stat st;
  if (::stat(arg.c_str(), &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
}

InputSet::~InputSet() {
  for (int fd : copies_) ::close(fd);
}

std::vector<TraceInput> InputSet::resolve(const std::string& arg) {
  if (!is_stream_input(arg)) {
    std::vector<TraceInput> inputs;
    for (const std::string& file : expand_inputs({arg})) inputs.push_back({file, file, ""});
    return inputs;
  }
  struct stat st;
  const bool is_stdin = arg == kStdinName ||
                        (::stat(arg.c_str(), &st) == 0 && [&] {
                          struct stat in;
                          return ::fstat(STDIN_FILENO, &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino;
                        }());
  if (is_stdin && stdin_read_) throw std::runtime_error(arg + ": standard input can be read only once");
  // What the stream is read from, by identity: -o must not empty it (`gpumem-report -o T - < T`).
  struct stat source;
  if (is_stdin ? ::fstat(STDIN_FILENO, &source) == 0 : ::stat(arg.c_str(), &source) == 0)
    stream_sources_.push_back({source.st_dev, source.st_ino, (is_stdin ? std::string("standard input") : arg) + ", read as a trace"});
  int copy = -1;
  if (is_stdin) {
    stdin_read_ = true;
    copy = copy_stream(STDIN_FILENO, arg);
  } else {
    // Opening a FIFO waits for a writer; the copy then ends when the last writer closes it.
    int fd = ::open(arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(arg + ": cannot open: " + error_text(errno));
    try {
      copy = copy_stream(fd, arg);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  copies_.push_back(copy);
  // The copy has no name: it is read (twice, for the what-if replays) through its descriptor.
  const std::string path = "/proc/self/fd/" + std::to_string(copy);
  return {{path, arg, path}};
}

void refuse_output_among_inputs(const std::string& output, const std::vector<std::string>& inputs,
                                const std::vector<FileId>& sources) {
  struct stat out;
  const bool output_exists = ::stat(output.c_str(), &out) == 0;
  for (const FileId& source : sources) {
    if (output_exists && source.dev == out.st_dev && source.ino == out.st_ino) {
      throw std::invalid_argument("-o " + output + " is " + source.name + ": it would be emptied before it is read");
    }
  }
  for (const std::string& input : inputs) {
    struct stat in;
    const bool same_file = output_exists && ::stat(input.c_str(), &in) == 0 && in.st_dev == out.st_dev &&
                           in.st_ino == out.st_ino;
    if (input == output || same_file) {
      throw std::invalid_argument("-o " + output + " is one of the traces (" + input +
                                  "): it would be emptied before it is read");
    }
  }
}

ProcessReport analyze_input(const TraceInput& input, const Suppressions& suppressions, ReadObserver* observer,
                            const AnalysisRequest& what_if) {
  if (input.spooled.empty()) return analyze_file(input.path, suppressions, observer, what_if);
  ProcessReport report;
  try {
    report = analyze_file(input.path, suppressions, observer, what_if);
  } catch (const TraceError& error) {
    throw TraceError(input.name, error.line(), error.message());
  }
  report.file = input.name;
  return report;
}

}  // namespace gpumemtrace::report
