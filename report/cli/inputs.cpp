// report/cli/inputs.cpp — TRACE arguments: files, directories and streams (see inputs.h).
#include "report/cli/inputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "report/reader/records.h"

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

// Copies `in` to its end into a new temporary file; returns its path. The suffix tells the reader how
// to read it: zstd frames start with 28 b5 2f fd, anything else is read as plain text (a snapshot
// pickle is recognised by its content). Throws std::runtime_error naming `name`.
std::string spool(int in, const std::string& name) {
  std::vector<char> buffer(1 << 20);
  size_t filled = 0;
  // The first bytes decide the suffix: read until there are 4 or the stream ends.
  while (filled < 4) {
    ssize_t n = ::read(in, buffer.data() + filled, buffer.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(name + ": cannot read: " + error_text(errno));
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  const bool zstd = filled >= 4 && std::memcmp(buffer.data(), "\x28\xb5\x2f\xfd", 4) == 0;
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/gpumem-report-stdin-XXXXXX" + (zstd ? ".zst" : ".jsonl");
  const int suffix = zstd ? 4 : 6;
  int out = ::mkstemps(path.data(), suffix);
  if (out < 0) throw std::runtime_error(name + ": cannot create a temporary copy in " + path + ": " + error_text(errno));
  auto fail = [&](const std::string& what) {
    const int error = errno;
    ::close(out);
    ::unlink(path.c_str());
    throw std::runtime_error(name + ": " + what + ": " + error_text(error));
  };
  while (true) {
    if (filled && !write_all(out, buffer.data(), filled)) fail("cannot write its temporary copy " + path);
    ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) {
      filled = 0;
      continue;
    }
    if (n < 0) fail("cannot read");
    if (n == 0) break;  // the end of the stream: every writer has closed it
    filled = static_cast<size_t>(n);
  }
  if (::close(out) != 0) {
    const int error = errno;
    ::unlink(path.c_str());
    throw std::runtime_error(name + ": cannot write its temporary copy " + path + ": " + error_text(error));
  }
  return path;
}

}  // namespace

bool is_stream_input(const std::string& arg) {
  if (arg == kStdinName) return true;
  struct stat st;
  if (::stat(arg.c_str(), &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
}

InputSet::~InputSet() {
  for (const std::string& path : temporaries_) ::unlink(path.c_str());
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
  std::string path;
  // What the stream is read from, by identity: -o must not empty it (`gpumem-report -o T - < T`).
  struct stat source;
  if (is_stdin ? ::fstat(STDIN_FILENO, &source) == 0 : ::stat(arg.c_str(), &source) == 0)
    stream_sources_.push_back({source.st_dev, source.st_ino, (is_stdin ? std::string("standard input") : arg) + ", read as a trace"});
  if (is_stdin) {
    stdin_read_ = true;
    path = spool(STDIN_FILENO, arg);
  } else {
    // Opening a FIFO waits for a writer; the copy then ends when the last writer closes it.
    int fd = ::open(arg.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(arg + ": cannot open: " + error_text(errno));
    try {
      path = spool(fd, arg);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  temporaries_.push_back(path);
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
